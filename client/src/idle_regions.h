// IdleRegions: memory regions a client keeps between collectives, and which one serves
// the next collective.
//
// A training loop all-reduces the same sizes step after step, and making a region (a
// file or memfd, its pages reserved and zeroed, mapped; for a registered one also a round
// trip to the worker) can cost as much as the collective. So a collective takes the
// smallest idle region that fits — at least its size, at most twice it — and gives it
// back when the worker is done with it. At most `max_regions` regions and `max_bytes`
// bytes stay idle; beyond that the longest idle are handed back to the caller to drop
// (outside any lock: dropping one may unmap, remove a file or tell the worker).
//
// The client's pools keep kMaxIdleRegions: a training step has as many large collectives
// in flight at once as it has gradient buckets (Horovod's and DDP's bucketing start one
// per bucket as backward fills it: ResNet-50's gradients make 32 buckets of at most
// 4 MiB, 5 of DDP's 25 MiB), and each finds its region again in the next step only if
// that many stay idle between steps.
//
// `Region` is movable and has `size_t size() const` (SharedMemoryRegion), or is a
// pointer to such a type (std::shared_ptr<RegisteredMemory>).
//
// Thread-safety: all methods are thread-safe.
#pragma once

#include <cstddef>
#include <deque>
#include <iterator>
#include <optional>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace ringsync::internal {

inline constexpr size_t kMaxIdleRegions = 32;
inline constexpr size_t kMaxIdleBytes = size_t{1} << 30;

template <typename Region>
class IdleRegions {
 public:
  IdleRegions(size_t max_regions, size_t max_bytes)
      : max_regions_(max_regions), max_bytes_(max_bytes) {}

  // The smallest idle region of [size_bytes, 2 x size_bytes], taken out; none if no
  // idle region fits.
  std::optional<Region> TakeFitting(size_t size_bytes) {
    absl::MutexLock lock(&mu_);
    auto best = idle_.end();
    for (auto it = idle_.begin(); it != idle_.end(); ++it) {
      const size_t size = SizeOf(*it);
      if (size >= size_bytes && size / 2 <= size_bytes &&
          (best == idle_.end() || size < SizeOf(*best))) {
        best = it;
      }
    }
    if (best == idle_.end()) return std::nullopt;
    Region region = std::move(*best);
    idle_.erase(best);
    idle_bytes_ -= SizeOf(region);
    return region;
  }

  // Every idle region, taken out (the longest idle first).
  [[nodiscard]] std::vector<Region> TakeAll() {
    absl::MutexLock lock(&mu_);
    std::vector<Region> all(std::make_move_iterator(idle_.begin()),
                            std::make_move_iterator(idle_.end()));
    idle_.clear();
    idle_bytes_ = 0;
    return all;
  }

  // Keeps `region` for reuse; returns the regions that no longer fit the bounds (the
  // longest idle first), for the caller to drop.
  [[nodiscard]] std::vector<Region> Put(Region region) {
    std::vector<Region> evicted;
    absl::MutexLock lock(&mu_);
    idle_bytes_ += SizeOf(region);
    idle_.push_back(std::move(region));
    while (idle_.size() > max_regions_ || idle_bytes_ > max_bytes_) {
      idle_bytes_ -= SizeOf(idle_.front());
      evicted.push_back(std::move(idle_.front()));
      idle_.pop_front();
    }
    return evicted;
  }

  size_t size() const {
    absl::MutexLock lock(&mu_);
    return idle_.size();
  }

 private:
  static size_t SizeOf(const Region& region) {
    if constexpr (requires { region->size(); }) {
      return region->size();
    } else {
      return region.size();
    }
  }

  const size_t max_regions_;
  const size_t max_bytes_;
  mutable absl::Mutex mu_;
  std::deque<Region> idle_ ABSL_GUARDED_BY(mu_);  // longest idle first
  size_t idle_bytes_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace ringsync::internal
