// SharedMemoryPool: one client's shared-memory files, kept between collectives.
//
// A fresh file per collective (create, reserve and zero its pages, map, unmap, remove)
// cost as much as the ring itself on a 1 Gbit/s link; which idle region serves a
// collective, and how many stay idle, is IdleRegions' rule. Every file is removed when
// its region is dropped, at the latest with the pool (the worker removes the files of a
// client that died).
//
// Thread-safety: all methods are thread-safe.
#pragma once

#include <cstddef>
#include <string>

#include "absl/status/statusor.h"
#include "client/src/idle_regions.h"
#include "client/src/shared_memory_region.h"

namespace ringsync::internal {

class SharedMemoryPool {
 public:
  static constexpr size_t kMinIdleRegions = internal::kMinIdleRegions;

  explicit SharedMemoryPool(std::string directory) : directory_(std::move(directory)) {}

  // A region of at least `size_bytes` (> 0) that no collective uses.
  absl::StatusOr<SharedMemoryRegion> Acquire(size_t size_bytes);
  // Gives back a region that no collective uses any more (the worker is done with it).
  void Release(SharedMemoryRegion region);
  // Drops a region the worker may still use (its collective was cancelled).
  void Discard(SharedMemoryRegion region);

  // Removes every idle region now; returns their bytes.
  size_t DropIdle();

  const std::string& directory() const { return directory_; }
  size_t idle_regions() const;

 private:
  const std::string directory_;
  IdleRegions<SharedMemoryRegion> idle_{kMinIdleRegions, kMinIdleBytes};
};

}  // namespace ringsync::internal
