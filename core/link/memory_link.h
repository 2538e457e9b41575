// In-process links: N ranks as threads of one process, joined in a ring by bounded
// FIFO channels. Used by the ring engine's tests and benchmarks, and by anyone who
// wants to see the algorithm run without a network.
//
// Thread-safety: all methods may be called from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "core/link/link.h"
#include "core/link/stride_links.h"

namespace ringsync {

// One direction of one ring edge: a FIFO holding at most `capacity` frames. Abort frames
// may use one slot beyond capacity so that giving up never waits on a stalled peer.
class MemoryChannel {
 public:
  explicit MemoryChannel(size_t capacity);

  absl::Status Push(const Frame& frame, absl::Span<const std::byte> payload,
                    const WaitLimit& limit);
  absl::StatusOr<ReceivedFrame> Pop(const WaitLimit& limit);
  absl::StatusOr<Frame> Peek(const WaitLimit& limit);

  uint64_t newest_aborted_sequence() const { return newest_aborted_.load(); }
  uint64_t payload_bytes_pushed() const { return payload_bytes_.load(); }
  uint64_t frames_pushed() const { return frames_.load(); }
  size_t high_water_mark() const;
  size_t queued() const;

 private:
  // Waits until a frame is queued, within `limit`.
  absl::Status AwaitFrame(const WaitLimit& limit) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  struct Entry {
    Frame frame;
    std::shared_ptr<std::vector<std::byte>> payload;
  };

  const size_t capacity_;
  mutable absl::Mutex mu_;
  std::deque<Entry> queue_ ABSL_GUARDED_BY(mu_);
  size_t high_water_mark_ ABSL_GUARDED_BY(mu_) = 0;
  std::atomic<uint64_t> payload_bytes_{0};
  std::atomic<uint64_t> frames_{0};
  std::atomic<uint64_t> newest_aborted_{0};
};

class MemoryRing {
 public:
  // REQUIRES: world_size >= 1, capacity_frames >= 1, 1 <= stride (< world_size but for 1).
  // `stride`: rank r sends to rank r+stride and receives from rank r-stride (a stride
  // link of StrideLinks); 1 is the ring.
  explicit MemoryRing(int world_size, size_t capacity_frames = 4, int stride = 1);

  int world_size() const { return static_cast<int>(channels_.size()); }

  // The link rank `rank` uses: sends into channel rank+stride, receives from channel rank.
  Link& link(int rank) { return *links_[rank]; }

  // Payload bytes rank `rank` has sent to its right neighbour so far.
  uint64_t bytes_sent(int rank) const;
  uint64_t frames_sent(int rank) const;
  // Most frames ever queued on the edge into `rank`.
  size_t high_water_mark(int rank) const { return channels_[rank]->high_water_mark(); }

 private:
  const int stride_;
  std::vector<std::unique_ptr<MemoryChannel>> channels_;  // channels_[r]: edge into rank r
  std::vector<std::unique_ptr<Link>> links_;
};

// Every rank's stride links (stride_links.h) in one process: one MemoryRing per stride.
// A rank's links of strides other than 1 count as connected from its first Stride call
// for them, as a daemon's do.
class MemoryStrideMesh {
 public:
  // REQUIRES: world_size >= 1, capacity_frames >= 1.
  explicit MemoryStrideMesh(int world_size, size_t capacity_frames = 16);
  ~MemoryStrideMesh();

  int world_size() const { return world_size_; }
  // Rank `rank`'s stride links.
  StrideLinks& links(int rank);
  // The ring of `stride`, to look at its links (REQUIRES: 1 <= stride < world_size).
  MemoryRing& ring(int stride) { return *rings_[static_cast<size_t>(stride - 1)]; }

 private:
  class RankLinks;
  const int world_size_;
  std::vector<std::unique_ptr<MemoryRing>> rings_;  // rings_[s-1]: stride s
  std::vector<std::unique_ptr<RankLinks>> ranks_;
};

}  // namespace ringsync
