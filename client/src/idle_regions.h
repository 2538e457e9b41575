// IdleRegions: memory regions a client keeps between collectives, and which one serves
// the next collective.
//
// A training loop all-reduces the same sizes step after step, and making a region (a
// file or memfd, its pages reserved and zeroed, mapped; for a registered one also a round
// trip to the worker) can cost as much as the collective — for a tensor of a GiB or more,
// twenty times as much on a virtual machine, whose fresh pages the host backs one fault
// at a time. So a collective takes the smallest idle region that fits — at least its
// size, at most twice it — and gives it back when the worker is done with it.
//
// How many stay idle: as many regions and bytes as the client has had in use at once,
// and at least `min_regions` and `min_bytes`. A training step has as many large
// collectives in flight at once as it has gradient buckets (Horovod's and DDP's bucketing
// start one per bucket as backward fills it: ResNet-50's gradients make 32 buckets of at
// most 4 MiB, 5 of DDP's 25 MiB; a model of a billion parameters, 4 GiB of them), and each
// finds its region again in the next step only if that many stay idle between steps.
// Beyond the minimums, idle memory never exceeds what the client already held in use at
// its peak (as a framework's caching allocator keeps its peak): the bound only stops
// regions of sizes no longer used from piling up. Beyond it the longest idle are handed
// back to the caller to drop (outside any lock: dropping one may unmap, remove a file or
// tell the worker).
//
// `Region` is movable and has `size_t size() const` (SharedMemoryRegion), or is a
// pointer to such a type (std::shared_ptr<RegisteredMemory>).
//
// Thread-safety: all methods are thread-safe.
#pragma once

#include <algorithm>
#include <cstddef>
#include <deque>
#include <iterator>
#include <optional>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace ringsync::internal {

// What stays idle at least, however few the client has had in use at once.
inline constexpr size_t kMinIdleRegions = 32;
inline constexpr size_t kMinIdleBytes = size_t{1} << 30;

template <typename Region>
class IdleRegions {
 public:
  IdleRegions(size_t min_regions, size_t min_bytes)
      : min_regions_(min_regions), min_bytes_(min_bytes) {}

  // The smallest idle region of [size_bytes, 2 x size_bytes], taken out, or else what
  // `make()` returns (an absl::StatusOr<Region>; called outside the lock). A region
  // handed out is in use until Put or Forget.
  template <typename Make>
  absl::StatusOr<Region> TakeOrMake(size_t size_bytes, Make&& make) {
    std::optional<Region> idle = TakeFitting(size_bytes);
    absl::StatusOr<Region> region = idle.has_value() ? *std::move(idle) : make();
    if (region.ok()) {
      absl::MutexLock lock(&mu_);
      in_use_regions_ += 1;
      in_use_bytes_ += SizeOf(*region);
      peak_regions_ = std::max(peak_regions_, in_use_regions_);
      peak_bytes_ = std::max(peak_bytes_, in_use_bytes_);
    }
    return region;
  }

  // Keeps `region`, no longer in use, for reuse; returns the regions beyond the bound (the
  // longest idle first), for the caller to drop.
  [[nodiscard]] std::vector<Region> Put(Region region) {
    std::vector<Region> evicted;
    absl::MutexLock lock(&mu_);
    NoLongerInUse(SizeOf(region));
    idle_bytes_ += SizeOf(region);
    idle_.push_back(std::move(region));
    const size_t max_regions = std::max(min_regions_, peak_regions_);
    const size_t max_bytes = std::max(min_bytes_, peak_bytes_);
    while (idle_.size() > max_regions || idle_bytes_ > max_bytes) {
      idle_bytes_ -= SizeOf(idle_.front());
      evicted.push_back(std::move(idle_.front()));
      idle_.pop_front();
    }
    return evicted;
  }

  // A region of `size_bytes` handed out that will not come back (the caller drops it).
  void Forget(size_t size_bytes) {
    absl::MutexLock lock(&mu_);
    NoLongerInUse(size_bytes);
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

  // The bytes of `regions` (as TakeAll and Put return them).
  static size_t BytesOf(const std::vector<Region>& regions) {
    size_t bytes = 0;
    for (const Region& region : regions) bytes += SizeOf(region);
    return bytes;
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

  void NoLongerInUse(size_t size_bytes) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    in_use_regions_ -= std::min<size_t>(in_use_regions_, 1);
    in_use_bytes_ -= std::min(in_use_bytes_, size_bytes);
  }

  const size_t min_regions_;
  const size_t min_bytes_;
  mutable absl::Mutex mu_;
  std::deque<Region> idle_ ABSL_GUARDED_BY(mu_);  // longest idle first
  size_t idle_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  size_t in_use_regions_ ABSL_GUARDED_BY(mu_) = 0;
  size_t in_use_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  size_t peak_regions_ ABSL_GUARDED_BY(mu_) = 0;  // the most in use at once
  size_t peak_bytes_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace ringsync::internal
