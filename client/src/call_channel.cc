#include "client/src/call_channel.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "google/protobuf/wire_format_lite.h"
#include "wire/call_channel_layout.h"
#include "wire/reaction_order.h"

namespace ringsync::internal {
namespace {

// How long the reader sleeps before it looks at its stop request again.
constexpr absl::Duration kReadSlice = absl::Milliseconds(20);
// Room a record needs beyond its CollectiveRequest or inline answer (ids, status, trailers).
constexpr size_t kRecordOverheadBytes = 4096;

absl::Span<std::byte> Bytes(RegisteredMemory& memory) {
  return absl::MakeSpan(static_cast<std::byte*>(memory.data()), memory.size());
}

}  // namespace

CallChannel::CallChannel(std::shared_ptr<RegisteredMemory> memory, uint64_t capacity,
                         OnAnswer on_answer, OnBroken on_broken, absl::Duration spin)
    : memory_(std::move(memory)),
      max_record_bytes_(FrameMailboxLayout::MaxRecordBytes(capacity)),
      requests_(CallChannelLayout::Requests(Bytes(*memory_), capacity), capacity),
      answers_(CallChannelLayout::Answers(Bytes(*memory_), capacity), capacity),
      on_answer_(std::move(on_answer)),
      on_broken_(std::move(on_broken)),
      spin_(spin),
      reader_([this](std::stop_token stop) { Read(stop); }) {}

CallChannel::~CallChannel() {
  reader_.request_stop();
  answers_.Ring();
  reader_.join();
}

bool CallChannel::Fits(size_t request_bytes, size_t answer_bytes) const {
  return request_bytes + kRecordOverheadBytes <= max_record_bytes_ &&
         answer_bytes + kRecordOverheadBytes <= max_record_bytes_;
}

absl::Status CallChannel::Send(uint64_t call_id, CollectiveKind kind,
                               const v1::CollectiveRequest& request, const WaitLimit& limit) {
  // A CallRequest is written as its small fields, then `request` as field 3 serialized
  // straight from the caller's message into a buffer kept between calls: copying it into a
  // CallRequest first and serializing that would allocate twice its size per call (its
  // inline tensor), memory that is new to the process each time once glibc has trimmed it.
  v1::CallRequest header;
  header.set_call_id(call_id);
  header.set_kind(static_cast<uint32_t>(kind));
  std::string prefix = header.SerializeAsString();
  const size_t request_bytes = request.ByteSizeLong();
  {
    google::protobuf::io::StringOutputStream stream(&prefix);
    google::protobuf::io::CodedOutputStream out(&stream);
    out.WriteTag(google::protobuf::internal::WireFormatLite::MakeTag(
        v1::CallRequest::kRequestFieldNumber,
        google::protobuf::internal::WireFormatLite::WIRETYPE_LENGTH_DELIMITED));
    out.WriteVarint64(request_bytes);
  }
  absl::MutexLock lock(&send_mu_);
  request_bytes_.resize(request_bytes);
  request.SerializeWithCachedSizesToArray(reinterpret_cast<uint8_t*>(request_bytes_.data()));
  const absl::Span<const std::byte> pieces[] = {
      {reinterpret_cast<const std::byte*>(prefix.data()), prefix.size()},
      {reinterpret_cast<const std::byte*>(request_bytes_.data()), request_bytes_.size()}};
  SentToOtherProcess(this);
  return requests_.Put(pieces, limit, [] { return false; });
}

void CallChannel::Read(std::stop_token stop) {
  // Kept across answers, so that their buffers are reused rather than allocated anew.
  std::vector<std::byte> record;
  v1::CallAnswer answer;
  while (!stop.stop_requested()) {
    absl::StatusOr<bool> taken = answers_.TakeOrWaitInto(record, kReadSlice, spin_);
    if (!taken.ok()) {
      on_broken_(taken.status());
      return;
    }
    if (!*taken) continue;
    ReceivedFromOtherProcess(this);
    if (!answer.ParseFromArray(record.data(), static_cast<int>(record.size()))) {
      on_broken_(absl::DataLossError("a call channel record is not a CallAnswer"));
      return;
    }
    on_answer_(answer);
  }
}

}  // namespace ringsync::internal
