// FailureCause: why a collective failed, in the small fixed vocabulary that metrics
// (ringsync_collectives_failed_total{cause}) and log lines use. Derived from the
// status code and the message the ring and the worker put in it.
#pragma once

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace ringsync {

enum class FailureCause {
  kMismatch,           // ranks disagreed on the collective (shape, name, order)
  kTimeout,            // a wait ran past the collective's deadline
  kPeerLost,           // a ring stream broke or a worker left / missed heartbeats
  kClientGone,         // a training process went away (here or on another rank)
  kGenerationChanged,  // a new ring view replaced the generation it ran on
  kMembershipChanged,  // marked OutcomeMark::kMembershipChanged: workers left or joined
  kInvalid,            // bad input: a malformed request or frame
  kOther,              // anything else (e.g. the worker is shutting down)
};

// "mismatch", "timeout", "peer_lost", "client_gone", "generation_changed",
// "membership_changed", "invalid", "other".
absl::string_view FailureCauseName(FailureCause cause);

// REQUIRES: !status.ok(). A status marked membership changed is that cause. Where a message holds several causes (another rank's abort
// quoting its reason), the most specific one wins: client_gone, mismatch, peer_lost,
// generation_changed, timeout, invalid, in that order.
FailureCause ClassifyFailure(const absl::Status& status);

}  // namespace ringsync
