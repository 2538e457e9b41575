// CollectiveCall: one collective as the user asked for it, checked before anything is
// sent, and its encoding as a ringsync.v1.CollectiveRequest (without data or sequence).
//
// Thread-safety: plain values and pure functions.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/collective.h"
#include "ringsync/v1/worker.pb.h"

namespace ringsync::internal {

// A fused all-reduce's data is scattered over its caller's tensors: each is input and
// output at once, and they follow one another in the collective's buffer.
struct TensorPiece {
  void* data = nullptr;
  size_t bytes = 0;
};

struct CollectiveCall {
  CollectiveSpec spec;  // kind, name, dtype, count per rank, op, root, scales, members
  absl::Duration timeout = absl::ZeroDuration();  // zero: the worker's default
  const void* input = nullptr;                    // spec.count elements
  void* output = nullptr;                         // output_count elements; the result lands here
  size_t output_count = 0;  // spec.count; world_size * spec.count for AllGather; for an
                            // uneven all-to-all the sum of its receive_counts
  // Non-empty for a fused all-reduce (input and output unused): one per spec.members.
  std::vector<TensorPiece> pieces;
  // Not OK: the SDK refused the caller's arguments (this says why, InvalidArgument); the
  // call only takes its turn on the ring as a refusal.
  absl::Status refusal;
};

struct CallBytes {
  size_t input = 0;
  size_t output = 0;
  bool side_by_side = false;  // an uneven all-to-all: the result follows the input
  // The worker's buffer for the call: the larger of the two (an all-gather's result holds
  // its input in the first slot, a reduce-scatter's input holds its result's block), or
  // both, side by side.
  size_t buffer() const { return side_by_side ? input + output : input > output ? input : output; }
};

// InvalidArgument (FailedPrecondition when the ring's size is unknown but needed) with a
// message naming the collective and the bad argument. `world_size` is the ring's current
// size, needed for Broadcast's root and AllGather's output.
absl::StatusOr<CallBytes> ValidateCall(const CollectiveCall& call, int world_size);

// "collective 'grad/fc1' (allreduce 1024 x float32 sum)", for messages.
std::string DescribeCall(const CollectiveCall& call);

// Every field but client_sequence and the data.
void EncodeRequest(const CollectiveCall& call, v1::CollectiveRequest* request);

}  // namespace ringsync::internal
