#include "client/src/shared_memory_pool.h"

#include <utility>
#include <vector>

namespace ringsync::internal {

absl::StatusOr<SharedMemoryRegion> SharedMemoryPool::Acquire(size_t size_bytes) {
  return idle_.TakeOrMake(size_bytes,
                          [&] { return SharedMemoryRegion::Create(size_bytes, directory_); });
}

void SharedMemoryPool::Release(SharedMemoryRegion region) {
  // Unmapped and removed here, outside the pool's lock.
  std::vector<SharedMemoryRegion> dropped = idle_.Put(std::move(region));
}

void SharedMemoryPool::Discard(SharedMemoryRegion region) { idle_.Forget(region.size()); }

size_t SharedMemoryPool::DropIdle() {
  return IdleRegions<SharedMemoryRegion>::BytesOf(idle_.TakeAll());
}

size_t SharedMemoryPool::idle_regions() const { return idle_.size(); }

}  // namespace ringsync::internal
