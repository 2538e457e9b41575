#include "daemon/worker/failure_cause.h"

#include <initializer_list>

#include "absl/strings/match.h"
#include "core/outcome.h"

namespace ringsync {
namespace {

bool ContainsAny(absl::string_view text, std::initializer_list<absl::string_view> needles) {
  for (absl::string_view needle : needles) {
    if (absl::StrContains(text, needle)) return true;
  }
  return false;
}

}  // namespace

absl::string_view FailureCauseName(FailureCause cause) {
  switch (cause) {
    case FailureCause::kMismatch:
      return "mismatch";
    case FailureCause::kTimeout:
      return "timeout";
    case FailureCause::kPeerLost:
      return "peer_lost";
    case FailureCause::kClientGone:
      return "client_gone";
    case FailureCause::kGenerationChanged:
      return "generation_changed";
    case FailureCause::kMembershipChanged:
      return "membership_changed";
    case FailureCause::kInvalid:
      return "invalid";
    case FailureCause::kOther:
      return "other";
  }
  return "other";
}

FailureCause ClassifyFailure(const absl::Status& status) {
  if (OutcomeMarkOf(status) == OutcomeMark::kMembershipChanged) {
    return FailureCause::kMembershipChanged;
  }
  const absl::string_view m = status.message();
  // The phrases below are the ones the ring (core/ring) and the worker write; their
  // tests pin them (failure_cause_test.cc quotes each).
  if (ContainsAny(m, {"has no training process attached", "disconnected during the collective",
                      "is not attached to the worker"})) {
    return FailureCause::kClientGone;
  }
  if (ContainsAny(m, {"ranks called different collectives", "every rank must pass the same"})) {
    return FailureCause::kMismatch;
  }
  if (ContainsAny(m, {"the ring stream to ", "the ring stream from ", "ring dissolved",
                      "missed heartbeats", "closed its WatchRing stream"})) {
    return FailureCause::kPeerLost;
  }
  if (ContainsAny(m, {"replaced it", "the ring changed under it", "generation ended"})) {
    return FailureCause::kGenerationChanged;
  }
  if (status.code() == absl::StatusCode::kDeadlineExceeded || absl::StrContains(m, "timed out")) {
    return FailureCause::kTimeout;
  }
  if (status.code() == absl::StatusCode::kInvalidArgument ||
      status.code() == absl::StatusCode::kOutOfRange) {
    return FailureCause::kInvalid;
  }
  return FailureCause::kOther;
}

}  // namespace ringsync
