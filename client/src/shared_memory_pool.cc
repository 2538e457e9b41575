#include "client/src/shared_memory_pool.h"

#include <utility>
#include <vector>

namespace ringsync::internal {

absl::StatusOr<SharedMemoryRegion> SharedMemoryPool::Acquire(size_t size_bytes) {
  {
    absl::MutexLock lock(&mu_);
    auto best = idle_.end();
    for (auto it = idle_.begin(); it != idle_.end(); ++it) {
      const size_t size = it->size();
      if (size >= size_bytes && size / 2 <= size_bytes &&
          (best == idle_.end() || size < best->size())) {
        best = it;
      }
    }
    if (best != idle_.end()) {
      SharedMemoryRegion region = std::move(*best);
      idle_.erase(best);
      idle_bytes_ -= region.size();
      return region;
    }
  }
  return SharedMemoryRegion::Create(size_bytes, directory_);
}

void SharedMemoryPool::Release(SharedMemoryRegion region) {
  std::vector<SharedMemoryRegion> dropped;  // unmapped and removed outside the lock
  {
    absl::MutexLock lock(&mu_);
    idle_bytes_ += region.size();
    idle_.push_back(std::move(region));
    while (idle_.size() > kMaxIdleRegions || idle_bytes_ > kMaxIdleBytes) {
      idle_bytes_ -= idle_.front().size();
      dropped.push_back(std::move(idle_.front()));
      idle_.pop_front();
    }
  }
}

size_t SharedMemoryPool::idle_regions() const {
  absl::MutexLock lock(&mu_);
  return idle_.size();
}

}  // namespace ringsync::internal
