#include "client/src/registered_buffer_registry.h"

#include <utility>

namespace ringsync::internal {

void RegisteredBufferRegistry::Add(uint64_t id, const void* data, size_t size) {
  absl::MutexLock lock(&mu_);
  by_start_[reinterpret_cast<uintptr_t>(data)] = Entry{id, size};
}

void RegisteredBufferRegistry::Remove(uint64_t id, const void* data) {
  absl::MutexLock lock(&mu_);
  by_start_.erase(reinterpret_cast<uintptr_t>(data));
  if (open_) release_(id);
}

void RegisteredBufferRegistry::Close() {
  absl::MutexLock lock(&mu_);
  open_ = false;
  by_start_.clear();
}

std::optional<RegisteredBufferRegistry::Location> RegisteredBufferRegistry::Find(
    const void* data, size_t bytes) const {
  const uintptr_t start = reinterpret_cast<uintptr_t>(data);
  absl::MutexLock lock(&mu_);
  auto it = by_start_.upper_bound(start);
  if (it == by_start_.begin()) return std::nullopt;
  --it;  // the buffer starting at or before `data`
  const uintptr_t offset = start - it->first;
  if (offset > it->second.size || bytes > it->second.size - offset) return std::nullopt;
  return Location{it->second.id, offset};
}

}  // namespace ringsync::internal
