#include "client/src/shared_memory_pool.h"

#include <utility>
#include <vector>

namespace ringsync::internal {

absl::StatusOr<SharedMemoryRegion> SharedMemoryPool::Acquire(size_t size_bytes) {
  if (std::optional<SharedMemoryRegion> idle = idle_.TakeFitting(size_bytes)) {
    return *std::move(idle);
  }
  return SharedMemoryRegion::Create(size_bytes, directory_);
}

void SharedMemoryPool::Release(SharedMemoryRegion region) {
  // Unmapped and removed here, outside the pool's lock.
  std::vector<SharedMemoryRegion> dropped = idle_.Put(std::move(region));
}

size_t SharedMemoryPool::idle_regions() const { return idle_.size(); }

}  // namespace ringsync::internal
