#include "client/src/call_channel.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "wire/call_channel_layout.h"

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
  v1::CallRequest call;
  call.set_call_id(call_id);
  call.set_kind(static_cast<uint32_t>(kind));
  *call.mutable_request() = request;
  const std::string bytes = call.SerializeAsString();
  const absl::Span<const std::byte> pieces[] = {
      {reinterpret_cast<const std::byte*>(bytes.data()), bytes.size()}};
  absl::MutexLock lock(&send_mu_);
  return requests_.Put(pieces, limit, [] { return false; });
}

void CallChannel::Read(std::stop_token stop) {
  while (!stop.stop_requested()) {
    absl::StatusOr<std::optional<std::vector<std::byte>>> record =
        answers_.TakeOrWait(kReadSlice, spin_);
    if (!record.ok()) {
      on_broken_(record.status());
      return;
    }
    if (!record->has_value()) continue;
    v1::CallAnswer answer;
    if (!answer.ParseFromArray((*record)->data(), static_cast<int>((*record)->size()))) {
      on_broken_(absl::DataLossError("a call channel record is not a CallAnswer"));
      return;
    }
    on_answer_(answer);
  }
}

}  // namespace ringsync::internal
