// Outcome marks: what a failed collective's status tells a training loop beyond its code.
//
// A collective is all-or-nothing: it returns OK on every rank or fails on every rank.
// Two failures ask the training loop for more than "retry or give up", so they carry a
// mark that survives every hop (ring -> worker -> gRPC -> SDK):
//
//   kMembershipChanged  the ring's membership changed (a worker was evicted, one was
//                       admitted, the ring re-formed): the collective did not run on the
//                       new ring, the caller's buffer is untouched, and rank and world size
//                       may have changed. The loop re-synchronises its state and goes on.
//   kInDoubt            the ring broke while the ranks were deciding the outcome, after the
//                       data had moved: this rank failed the collective (its buffer is
//                       untouched) but cannot know whether another rank completed it. The
//                       one case an all-or-nothing ring cannot close; the loop
//                       re-synchronises its state rather than simply retrying the step.
//
// The mark is an absl::Status payload (kOutcomePayloadUrl); on gRPC it travels as the
// "ringsync-outcome" trailing metadata with OutcomeMarkName's text.
//
// Thread-safety: pure functions.
#pragma once

#include <optional>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace ringsync {

enum class OutcomeMark {
  kNone,
  kMembershipChanged,
  kInDoubt,
};

inline constexpr absl::string_view kOutcomePayloadUrl = "type.ringsync.dev/ringsync.Outcome";
inline constexpr absl::string_view kOutcomeMetadataKey = "ringsync-outcome";
// With kMembershipChanged on gRPC: the id of the ring's new membership, which the client
// names in its next requests (worker.proto, CollectiveRequest.membership).
inline constexpr absl::string_view kMembershipMetadataKey = "ringsync-membership";

// `status` with `mark` attached (replacing any earlier one). An OK status stays OK, unmarked.
absl::Status WithOutcomeMark(absl::Status status, OutcomeMark mark);
// kNone for OK and unmarked statuses.
OutcomeMark OutcomeMarkOf(const absl::Status& status);

// "membership_changed", "in_doubt"; "" for kNone.
absl::string_view OutcomeMarkName(OutcomeMark mark);
// The mark named `name`; nullopt for an unknown name (from an unknown peer version).
std::optional<OutcomeMark> ParseOutcomeMark(absl::string_view name);

}  // namespace ringsync
