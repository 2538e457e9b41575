// RegisteredBuffers: the attached training process's registered buffers — memory it
// allocated through the SDK (Client::Allocate) that the worker maps too, so that a
// collective on it is reduced where it lies, with no copy in or out.
//
// The memory is a sealed memfd that cannot fault in the worker (daemon/shm/sealed_mapping.h
// says why and what is checked before it is mapped).
//
// The descriptor reaches the worker over its descriptor socket (descriptor_inbox.h,
// RegisterDescriptor), which works from any pid namespace; or, from SDKs before it, by
// path, /proc/<client pid>/fd/<fd>, with the pid from the kernel (SO_PEERCRED): then the
// client's pid must be visible to the worker (same pid namespace), or registration fails
// with FailedPrecondition and the SDK's Allocate says so. Either way the memory must be
// the client's uid's.
//
// Bounds: at most `max_buffers` registrations per attachment, each of 1..`max_bytes`
// bytes; every (id, offset, size) a request names is checked against the mapping.
//
// Thread-safety: all methods are thread-safe. A mapping lives as long as its last user
// (a running collective keeps its buffer mapped after Release or Clear).
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "daemon/process/unique_fd.h"
#include "daemon/shm/sealed_mapping.h"

namespace ringsync {

struct RegisteredBufferLimits {
  size_t max_buffers = 64;
  uint64_t max_bytes = uint64_t{16} << 30;
};

class RegisteredBuffers {
 public:
  explicit RegisteredBuffers(RegisteredBufferLimits limits) : limits_(limits) {}

  // Registers descriptor `fd` of the client `pid` (uid `uid`): its id, never 0.
  // InvalidArgument for a bad fd/size or a descriptor that is not a sealed, allocated
  // memfd; ResourceExhausted past the bounds; FailedPrecondition when the pid is not
  // visible (pid <= 0) or its descriptor cannot be opened from here.
  absl::StatusOr<uint64_t> Register(pid_t pid, uid_t uid, int64_t fd, uint64_t size_bytes);
  // The same for a descriptor the client handed over (descriptor_inbox.h): no pid needed,
  // so it works across pid namespaces. The caller keeps and closes `fd`.
  absl::StatusOr<uint64_t> RegisterDescriptor(uid_t uid, const UniqueFd& fd, uint64_t size_bytes);
  // NotFound for an unknown id.
  absl::Status Release(uint64_t id);
  // Forgets every registration (the client detached).
  void Clear();
  size_t size() const;
  // The bytes of every buffer registered now.
  uint64_t bytes() const;

  struct Slice {
    std::shared_ptr<SealedMapping> mapping;  // keeps the memory mapped
    absl::Span<std::byte> bytes;
  };
  // [offset, offset + size_bytes) of buffer `id`: InvalidArgument naming what is wrong
  // for an unknown id or a range outside the buffer.
  absl::StatusOr<Slice> Find(uint64_t id, uint64_t offset, uint64_t size_bytes) const;

 private:
  // Bounds, then `map`, then the registration.
  absl::StatusOr<uint64_t> Add(
      uint64_t size_bytes, absl::FunctionRef<absl::StatusOr<std::shared_ptr<SealedMapping>>()> map);

  const RegisteredBufferLimits limits_;
  mutable absl::Mutex mu_;
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  absl::flat_hash_map<uint64_t, std::shared_ptr<SealedMapping>> buffers_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ringsync
