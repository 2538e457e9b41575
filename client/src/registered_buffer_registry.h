// RegisteredBufferRegistry: a client's registered buffers by address, so that a collective
// on a span inside one is sent as (buffer id, offset) rather than copied; and the way a
// buffer's destruction reaches the worker (ReleaseBuffer) for as long as the Client lives.
//
// Thread-safety: all methods are thread-safe. `release` runs under the registry's lock, so
// Close returns only once no release runs any more.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/synchronization/mutex.h"

namespace ringsync::internal {

class RegisteredBufferRegistry {
 public:
  explicit RegisteredBufferRegistry(absl::AnyInvocable<void(uint64_t id)> release)
      : release_(std::move(release)) {}

  void Add(uint64_t id, const void* data, size_t size);
  // Forgets buffer `id` at `data`, and tells the worker unless closed.
  void Remove(uint64_t id, const void* data);
  // The Client is going: no release from now on (the worker forgets its buffers when the
  // client detaches).
  void Close();

  struct Location {
    uint64_t id = 0;
    uint64_t offset = 0;
  };
  // The buffer holding all of [data, data + bytes), if any. REQUIRES: bytes > 0.
  std::optional<Location> Find(const void* data, size_t bytes) const;

 private:
  struct Entry {
    uint64_t id;
    size_t size;
  };
  mutable absl::Mutex mu_;
  bool open_ ABSL_GUARDED_BY(mu_) = true;
  absl::AnyInvocable<void(uint64_t id)> release_ ABSL_GUARDED_BY(mu_);
  std::map<uintptr_t, Entry> by_start_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ringsync::internal
