// ringsync::ElasticState: a training loop's state that outlives a change of the ring's
// membership — Horovod Elastic's commit / restore / sync, over a ringsync::Client.
//
//   ringsync::ElasticState state(*client);
//   state.Register("weights", absl::MakeSpan(weights));
//   if (absl::Status s = state.Sync(); !s.ok()) return s;   // a joining rank gets the state
//   while (state.step() < steps) {
//     ComputeGradient(weights, Shard(data, client->rank(), client->world_size()), grad);
//     absl::Status s = client->AllReduce("grad", absl::MakeSpan(grad), ringsync::ReduceOp::kAvg);
//     if (ringsync::IsMembershipChanged(s) || ringsync::IsInDoubt(s)) {
//       state.Restore();                                        // back to the last commit
//       if (s = state.Sync(); !s.ok()) return s;                // agree on the newest one
//       continue;                                               // re-shard by the new rank
//     }
//     if (!s.ok()) return s;
//     Apply(grad, weights);
//     state.set_step(state.step() + 1);
//     state.Commit();
//   }
//
// Commit() snapshots every registered buffer and the step counter; Restore() copies the
// snapshot back. Sync() makes every rank of the current ring hold the newest committed
// state: an all-reduce (MAX) of the ranks' committed steps, an all-reduce (MIN) picking
// the lowest rank that holds that step, and a broadcast of every buffer from it; then
// every rank commits what it holds. A rank that never committed (a newly admitted worker's
// training process, whatever rank it got) takes part with step "none" and so receives
// the survivors' state; when no rank has committed yet, rank 0's buffers are the state.
// A membership change during Sync (IsMembershipChanged, IsInDoubt, a ring not formed yet)
// starts it again on the new ring, within ElasticOptions::sync_timeout.
//
// Every rank must register the same buffers (names, dtypes, counts) in the same order.
// Sync's collectives are named "ringsync.elastic/..."; it is a collective call like any
// other, so every rank calls it at the same point of its loop.
//
// Thread-safety: not thread-safe; one training loop owns it. The Client and the
// registered buffers must outlive it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "ringsync/client.h"
#include "ringsync/types.h"

namespace ringsync {

struct ElasticOptions {
  // How long one Sync may take in all, waits for the ring to re-form included.
  absl::Duration sync_timeout = absl::Seconds(120);
  // The first pause before Sync starts again after a membership change; it doubles up to
  // one second.
  absl::Duration retry_backoff = absl::Milliseconds(20);
  // Each of Sync's collectives; zero: the worker's default.
  absl::Duration collective_timeout = absl::ZeroDuration();
};

class ElasticState {
 public:
  explicit ElasticState(Client& client, ElasticOptions options = {});

  // Adds a buffer to the state. `name` (non-empty, unique) labels its broadcast.
  // REQUIRES: before the first Commit or Sync; the buffer outlives this.
  template <Element T>
  void Register(absl::string_view name, absl::Span<T> buffer) {
    Register(name, buffer.data(), buffer.size(), kDTypeOf<T>);
  }
  // Raw form, for any DType (float16/bfloat16 as uint16_t storage, bytes as kUInt8).
  void Register(absl::string_view name, void* data, size_t count, DType dtype);

  // The loop's step counter: part of the state, committed and synced with the buffers.
  uint64_t step() const { return step_; }
  void set_step(uint64_t step) { step_ = step; }

  // Snapshots every buffer and the step.
  void Commit();
  // Copies the last commit back into the buffers and the step; without one, does nothing.
  void Restore();
  bool has_commit() const { return committed_step_.has_value(); }
  // How many times Sync started over after a membership change (for logs and tests).
  int sync_restarts() const { return sync_restarts_; }

  // Every rank of the current ring agrees on the newest committed state (see above) and
  // commits it. Errors other than a membership change are returned at once; so is the
  // last one when sync_timeout passes. On an error the buffers hold this rank's last
  // commit when it has one.
  absl::Status Sync();

 private:
  struct Buffer {
    std::string name;
    void* data;
    size_t count;
    DType dtype;
    size_t bytes;
    std::vector<std::byte> committed;
  };

  // One pass of Sync over the ring as it is now.
  absl::Status SyncOnce();

  Client& client_;
  const ElasticOptions options_;
  std::vector<Buffer> buffers_;
  uint64_t step_ = 0;
  std::optional<uint64_t> committed_step_;
  int sync_restarts_ = 0;
};

}  // namespace ringsync
