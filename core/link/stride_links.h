// StrideLinks: the links of one rank to the ranks at a distance beyond its neighbours.
// The link of stride s sends to rank+s and receives from rank-s (mod N): the ring's
// link is stride 1, and the doubling all-reduce (core/ring/stride_allreduce.h) uses
// strides 1, 2, 4, ... so that a frame reaches every rank in log2 N hops.
//
// Contract (beyond Link's, which each stride link keeps):
//   * Stride(1) is the ring link. Any other stride's link is connected on its first use
//     (or, by an implementation that knows the algorithms, ahead of it) and kept for the
//     rest of the generation: links to non-neighbours no algorithm uses cost nothing.
//   * Like the ring link, a stride link belongs to one generation: its receiving end
//     accepts frames only from the rank the generation's view puts at rank-s.
//   * Connecting does not wait for rank-s: a frame from it is waited for by Receive,
//     within that call's limit, like any other.
//   * Each link queues at least kStrideLinkQueuedFrames frames that its receiver has not
//     read, of up to the stride algorithms' frame size (AlgorithmPolicy::
//     stride_frame_bytes): Send returns for those without waiting for the receiver. Of
//     larger frames (a direct transfer's segments, core/ring/direct_transfer.h) it
//     queues at least one.
// Thread-safety: one thread (the collective's) uses a StrideLinks at a time.
#pragma once

#include <vector>

#include "absl/status/statusor.h"
#include "core/link/link.h"
#include "core/sync/wait_limit.h"

namespace ringsync {

inline constexpr int kStrideLinkQueuedFrames = 4;

class StrideLinks {
 public:
  virtual ~StrideLinks() = default;

  // The link of `stride` (REQUIRES: 1 <= stride < world size), connected within `limit`
  // if it is not yet. The link lives as long as this object.
  virtual absl::StatusOr<Link*> Stride(int stride, const WaitLimit& limit) = 0;

  // Every link connected so far, the ring link first: where a rank that gives up tells
  // the others, and where it looks for their notices while it waits.
  virtual std::vector<Link*> Connected() = 0;
};

}  // namespace ringsync
