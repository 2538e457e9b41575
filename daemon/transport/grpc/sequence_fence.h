// SequenceFence: the order of collective sequence numbers on one ring edge of one
// generation, as the receiving worker enforces it.
//
// Every collective a sender takes part in sends at least one frame on the edge (its
// agreement, or its abort), in order, so on one stream the sequence number never goes
// back and goes forward by at most one. A stream that replaces a broken one may skip a
// few: collectives whose frames were lost with the old stream. Anything else can only
// come from a broken or forged sender, and accepted it would move the worker's counters —
// a sequence number near 2^64 wraps them, and every later collective fails.
//
// Thread-safety: none; PeerInbox holds it under its mutex.
#pragma once

#include <cstdint>

#include "absl/status/status.h"

namespace ringsync {

class SequenceFence {
 public:
  // `skips_collectives`: the edge carries only some collectives (a stride link: the
  // stride all-reduces'), so its sequence numbers may go forward by any amount, though
  // never back. Its frames move no counter of the worker's (only those algorithms read them,
  // and fails a collective whose number is not its own).
  explicit SequenceFence(bool skips_collectives = false) : skips_collectives_(skips_collectives) {}

  // How far the first frame of a stream may lie beyond the newest one seen on the edge.
  static constexpr uint64_t kMaxSkipOnNewStream = 16;

  // Admits the next frame's sequence number, `first_on_stream` when no frame came on its
  // stream yet. PermissionDenied, naming both numbers, for one out of order (the edge's
  // state is then unchanged).
  absl::Status Admit(uint64_t sequence, bool first_on_stream);

  // The newest sequence number admitted; 0 before any.
  uint64_t newest() const { return newest_; }

 private:
  bool skips_collectives_;
  uint64_t newest_ = 0;
};

}  // namespace ringsync
