#include "core/link/faulty_link.h"

#include <optional>

#include "absl/strings/str_cat.h"

namespace ringsync {
namespace {

// Waits out `limit` as a blocked Send would: DeadlineExceeded at its deadline, or
// Cancelled soon after its cancellation.
absl::Status WaitOut(const WaitLimit& limit, absl::string_view what) {
  absl::Mutex mu;
  absl::MutexLock lock(&mu);
  const auto never = [] { return false; };
  return AwaitWithLimit(mu, absl::Condition(&never), limit, what);
}

}  // namespace

void FaultyLink::Script(uint64_t send_index, LinkFault fault) {
  absl::MutexLock lock(&mu_);
  script_[send_index] = fault;
}

uint64_t FaultyLink::sends() const {
  absl::MutexLock lock(&mu_);
  return sends_;
}

absl::Status FaultyLink::Send(const Frame& frame, absl::Span<const std::byte> payload,
                              const WaitLimit& limit) {
  std::optional<LinkFault> fault;
  uint64_t index = 0;
  {
    absl::MutexLock lock(&mu_);
    index = sends_++;
    if (auto it = script_.find(index); it != script_.end()) fault = it->second;
    if (fault.has_value() && fault->kind == LinkFault::Kind::kClose) closed_ = true;
    if (closed_) {
      return absl::UnavailableError(
          absl::StrCat("the link was closed by fault injection (send #", index, ")"));
    }
  }
  if (!fault.has_value()) return inner_.Send(frame, payload, limit);
  switch (fault->kind) {
    case LinkFault::Kind::kDrop:
      return absl::OkStatus();
    case LinkFault::Kind::kDelay: {
      const SteadyDeadline until(fault->delay);
      if (!(until < limit.deadline) || limit.IsCancelled()) return WaitOut(limit, "delayed send");
      if (absl::Status s = WaitOut({until, limit.cancellation}, "delayed send"); absl::IsCancelled(s)) {
        return s;
      }
      return inner_.Send(frame, payload, limit);
    }
    case LinkFault::Kind::kCorrupt: {
      Frame misplaced = frame;
      ++misplaced.step;
      return inner_.Send(misplaced, payload, limit);
    }
    case LinkFault::Kind::kStall:
      return WaitOut(limit, "stalled send");
    case LinkFault::Kind::kClose:
      break;  // handled above
  }
  return absl::InternalError("unknown link fault");
}

}  // namespace ringsync
