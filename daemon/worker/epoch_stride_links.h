// EpochStrideLinks: one generation's StrideLinks (core/link/stride_links.h) — the
// epoch's ring link as stride 1, and stride links connected through the LinkFactory,
// kept until the epoch ends (they are fenced by its generation like the ring link: the
// registry's inbox of each accepts only the rank the view puts there).
//
// A link is connected on its first use, or before it: once the ring forms, the worker
// connects ahead the links its small all-reduces will use (StridesToConnectAhead), so
// that the first of them does not wait for connections — and for name lookups, which a
// container network starting trainers beside the workers can stall for seconds.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "core/link/stride_links.h"
#include "core/ring/allreduce_algorithm.h"
#include "daemon/worker/ring_epoch.h"

namespace ringsync {

// The strides (2 and up) whose links the stride algorithm that `policy` runs small
// all-reduces with over `world_size` ranks uses; none when it relays or runs the ring.
// Every algorithm `policy` may choose uses no other (a larger buffer never runs a
// stride algorithm that a smaller one does not).
std::vector<int> StridesToConnectAhead(int world_size, const AlgorithmPolicy& policy);

// Thread-safety: the collective's thread uses it as StrideLinks says; ConnectAhead may
// run beside it on another thread.
class EpochStrideLinks final : public StrideLinks {
 public:
  // REQUIRES: `epoch.link` is connected; `epoch`, `factory` and `connected_total` outlive
  // this. `connected_total` counts every stride link connected, and
  // `epoch.stride_links_open` those open now (metrics).
  EpochStrideLinks(RingEpoch& epoch, LinkFactory& factory, std::atomic<uint64_t>& connected_total)
      : epoch_(epoch), factory_(factory), connected_total_(connected_total) {}

  // While another thread connects `stride`'s link, waits for it (within `limit`) rather
  // than connecting a second; connects it itself if that one failed.
  absl::StatusOr<Link*> Stride(int stride, const WaitLimit& limit) override;
  std::vector<Link*> Connected() override;

  // Connects the links of `strides` not connected yet, one after another, each within
  // `limit`. A link that fails is left to its first use, which tries again; the
  // failures are logged, and the first one returned. Cancelled once the limit's
  // cancellation (the generation's end) is.
  absl::Status ConnectAhead(absl::Span<const int> strides, const WaitLimit& limit);

 private:
  RingEpoch& epoch_;
  LinkFactory& factory_;
  std::atomic<uint64_t>& connected_total_;
  absl::Mutex mu_;
  std::map<int, std::unique_ptr<Link>> strides_ ABSL_GUARDED_BY(mu_);  // by stride, 2 and up
  std::set<int> connecting_ ABSL_GUARDED_BY(mu_);                      // by some thread now
};

}  // namespace ringsync
