// What a failed collective asks of the training loop, beyond its status code.
//
// Collectives are all-or-nothing: one returns OK on every rank or fails on every rank,
// and a failed one leaves the caller's buffer untouched. Two failures need more than a
// retry from the loop; these tell them apart.
//
//   absl::Status s = client->AllReduce("grad", absl::MakeSpan(grad), ReduceOp::kAvg);
//   if (ringsync::IsMembershipChanged(s)) { /* re-synchronise state, continue */ }
//
// Thread-safety: pure functions.
#pragma once

#include "absl/status/status.h"

namespace ringsync {

// The ring's membership changed (a worker was evicted or admitted and the ring re-formed):
// the collective did not run, the buffer is untouched, and Client::rank()/world_size()
// may have changed. Re-synchronise the training state across the new ring and go on.
bool IsMembershipChanged(const absl::Status& status);

// The one case all-or-nothing cannot close: the ring broke while the ranks were deciding
// the outcome, after the data had moved. This rank failed the collective (its buffer is
// untouched), but another rank may have completed it. Re-synchronise the training state
// rather than simply retrying the step.
bool IsInDoubt(const absl::Status& status);

}  // namespace ringsync
