// RingEpoch: one generation of the ring as this worker takes part in it, and the seams
// around it — where the executor gets the epoch to run on (EpochSource) and how the
// epoch's link is connected (LinkFactory). The daemon puts RingManager and gRPC links
// behind them; tests put in-memory rings.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/link/link.h"
#include "core/link/stride_links.h"
#include "core/ring/ring_member.h"
#include "core/sync/cancellation.h"
#include "core/sync/wait_limit.h"
#include "daemon/worker/ring_membership.h"

namespace ringsync {

struct RingEpoch {
  RingMember me;
  std::vector<std::string> worker_ids;      // by rank
  std::vector<std::string> peer_addresses;  // by rank: where each Peer service listens
  std::vector<std::string> observed_hosts;  // by rank: RingMember.observed_host
  Cancellation over;                        // cancelled when the generation ends
  std::unique_ptr<Link> link;               // set once connected
  // Set with `link`: it as stride 1, and the links beyond the neighbours, connected ahead
  // or on first use (EpochStrideLinks). Used by the executor thread once set, and by the
  // thread that connects links ahead.
  std::unique_ptr<StrideLinks> strides;
  std::atomic<int> stride_links_open{0};    // of `strides`, for metrics (any thread)
  // Next ring sequence number, and the newest collective this rank ran (itself, not
  // skipped); touched only by the executor thread.
  uint64_t next_sequence = 1;
  uint64_t newest_run = 0;

  std::string Describe(int rank) const;  // "rank 2 (worker w2)"
};

// Where collectives find the ring. Thread-safety: safe from any thread.
class EpochSource {
 public:
  virtual ~EpochSource() = default;
  // The ready epoch; waits within `limit` while there is none yet. Fails with the reason
  // when there will be none (the ring dissolved without this worker) or at the limit.
  virtual absl::StatusOr<std::shared_ptr<RingEpoch>> AwaitReady(const WaitLimit& limit) = 0;
  // The ready epoch or null, without waiting.
  virtual std::shared_ptr<RingEpoch> Ready() = 0;
  // The ring's membership now (ring_membership.h). A source whose membership never
  // changes keeps the default.
  virtual MembershipSnapshot Membership() { return {}; }
};

// Connects the link of one generation. Thread-safety: safe from any thread.
class LinkFactory {
 public:
  virtual ~LinkFactory() = default;
  // This rank's link of `epoch` (epoch.me): frames out to rank+1, in from rank-1. Fails
  // at `limit`, or at once when the generation was retired.
  virtual absl::StatusOr<std::unique_ptr<Link>> Connect(const RingEpoch& epoch,
                                                        const WaitLimit& limit) = 0;
  // This rank's stride link of `stride` in `epoch` (core/link/stride_links.h): frames
  // out to rank+stride, in from rank-stride; it does not wait for rank-stride. Fails at
  // `limit`. A factory without stride links says Unimplemented.
  virtual absl::StatusOr<std::unique_ptr<Link>> ConnectStride(const RingEpoch& epoch, int stride,
                                                              const WaitLimit& limit) {
    (void)epoch, (void)stride, (void)limit;
    return absl::UnimplementedError("this transport has no stride links");
  }
  // Generations before `generation` are over: whatever their links still wait for fails
  // with `why`.
  virtual void RetireBefore(uint64_t generation, const absl::Status& why) = 0;
  // The worker is shutting down: every link, and every later Connect, fails with `why`.
  virtual void CloseAll(const absl::Status& why) = 0;
};

}  // namespace ringsync
