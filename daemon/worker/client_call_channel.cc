#include "daemon/worker/client_call_channel.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"

namespace ringsync {
namespace {

// How long the channel's thread sleeps before it looks at its stop request and at answers
// that did not fit again.
constexpr absl::Duration kIdleSlice = absl::Milliseconds(20);
constexpr absl::Duration kRetrySlice = absl::Milliseconds(2);

}  // namespace

class ClientCallChannel::Answers {
 public:
  Answers(absl::Span<std::byte> area, uint64_t capacity, FrameMailboxReader& wake)
      : writer_(area, capacity),
        writer_max_record_(FrameMailboxLayout::MaxRecordBytes(capacity)),
        wake_(wake) {}

  // Writes `answer` now if it fits, else keeps it for Flush.
  void Post(const v1::CallAnswer& answer) {
    std::string bytes = answer.SerializeAsString();
    if (bytes.size() > writer_max_record_) {
      // Never silently: the client waits for this call's answer.
      v1::CallAnswer too_large;
      too_large.set_call_id(answer.call_id());
      too_large.set_code(static_cast<int>(absl::StatusCode::kInternal));
      too_large.set_message(absl::StrCat("the answer (", bytes.size(),
                                         " bytes) does not fit the call channel"));
      bytes = too_large.SerializeAsString();
    }
    absl::MutexLock lock(&mu_);
    if (closed_) return;
    if (unsent_.empty() && TryPutLocked(bytes)) return;
    unsent_.push_back(bytes);
    wake_.Ring();  // the channel's thread writes it once there is room
  }

  // Writes the kept answers that fit now; whether some are still kept.
  bool Flush() {
    absl::MutexLock lock(&mu_);
    while (!closed_ && !unsent_.empty() && TryPutLocked(unsent_.front())) unsent_.pop_front();
    return !closed_ && !unsent_.empty();
  }

  void Close() {
    absl::MutexLock lock(&mu_);
    closed_ = true;
    unsent_.clear();
  }

 private:
  bool TryPutLocked(const std::string& bytes) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const absl::Span<const std::byte> piece(reinterpret_cast<const std::byte*>(bytes.data()),
                                            bytes.size());
    const absl::Span<const std::byte> pieces[] = {piece};
    // No wait: the client's reader drains answers as they come; a client that is frozen
    // must not hold the executor.
    return writer_.Put(pieces, WaitLimit{SteadyDeadline(absl::ZeroDuration()), nullptr}, [] { return false; }).ok();
  }

  absl::Mutex mu_;
  FrameMailboxWriter writer_ ABSL_GUARDED_BY(mu_);
  const uint64_t writer_max_record_;
  FrameMailboxReader& wake_;  // the request mailbox, whose doorbell the thread sleeps on
  std::deque<std::string> unsent_ ABSL_GUARDED_BY(mu_);
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
};

ClientCallChannel::ClientCallChannel(std::shared_ptr<SealedMapping> mapping,
                                     absl::Span<std::byte> buffer, uint64_t capacity,
                                     Submit submit,
                                     std::function<void(const absl::Status&)> on_broken,
                                     absl::Duration spin)
    : mapping_(std::move(mapping)),
      requests_(CallChannelLayout::Requests(buffer, capacity), capacity),
      answers_(std::make_shared<Answers>(CallChannelLayout::Answers(buffer, capacity), capacity,
                                         requests_)),
      submit_(std::move(submit)),
      on_broken_(std::move(on_broken)),
      spin_(spin),
      thread_([this](std::stop_token stop) { Loop(stop); }) {}

ClientCallChannel::~ClientCallChannel() {
  thread_.request_stop();
  requests_.Ring();
  thread_.join();
  answers_->Close();
}

void ClientCallChannel::Loop(std::stop_token stop) {
  std::vector<std::byte> record;  // kept for its capacity: requests may carry whole tensors
  while (!stop.stop_requested()) {
    const bool kept = answers_->Flush();
    absl::StatusOr<bool> taken = requests_.TakeOrWaitInto(record, kept ? kRetrySlice : kIdleSlice, spin_);
    if (!taken.ok()) {
      on_broken_(taken.status());
      return;
    }
    if (*taken && !Handle(record)) return;
  }
}

bool ClientCallChannel::Handle(const std::vector<std::byte>& record) {
  v1::CallRequest call;
  if (!call.ParseFromArray(record.data(), static_cast<int>(record.size()))) {
    on_broken_(absl::InvalidArgumentError("a call channel record is not a CallRequest"));
    return false;  // as the header says: the channel stops reading
  }
  // Only the answer's side holds on to the answers: a late one after Close is dropped.
  const uint64_t call_id = call.call_id();
  Answer answer = [answers = answers_, call_id](v1::CallAnswer reply) {
    reply.set_call_id(call_id);
    answers->Post(reply);
  };
  if (call.kind() < static_cast<uint32_t>(CollectiveKind::kAllReduce) ||
      call.kind() > static_cast<uint32_t>(CollectiveKind::kAllToAll)) {
    v1::CallAnswer refused;
    refused.set_code(static_cast<int>(absl::StatusCode::kInvalidArgument));
    refused.set_message(absl::StrCat("a call of unknown kind ", call.kind()));
    answer(std::move(refused));
    return true;
  }
  submit_(static_cast<CollectiveKind>(call.kind()), call.request(), answer);
  return true;
}

}  // namespace ringsync
