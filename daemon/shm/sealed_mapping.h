// SealedMapping: another local process's memfd, mapped read-write into this one — the
// way the worker shares memory with its training process (registered buffers) and with a
// ring neighbour on the same host (the shared-memory slot ring).
//
// Why only sealed memfds: a mapped file that its owner truncates raises SIGBUS in
// whichever thread touches it. A memfd sealed with F_SEAL_SHRINK | F_SEAL_GROW cannot
// change size, and one whose pages are allocated (fallocate) cannot run out of space, so
// the mapping cannot fault. Map checks all of it before mapping: a regular file of the
// expected owner, sealed so, exactly the expected size, fully allocated. A memfd has no
// name in any directory: nothing is left behind when either process dies.
//
// Thread-safety: immutable; the mapped bytes are the users' to coordinate.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace ringsync {

// A memfd of another process mapped read-write here; unmapped on destruction.
class SealedMapping {
 public:
  // Opens `fd_path` (e.g. /proc/<pid>/fd/<n>), checks it (see above) and maps it.
  // FailedPrecondition when it cannot be opened from here; InvalidArgument (or
  // PermissionDenied for another owner) naming the failed check. REQUIRES nothing.
  static absl::StatusOr<std::shared_ptr<SealedMapping>> Map(const std::string& fd_path,
                                                                uid_t owner_uid,
                                                                uint64_t size_bytes);
  // The same checks and mapping for a descriptor this process holds already (one the
  // other process handed over, SCM_RIGHTS); `what` names it in errors. `fd` stays open:
  // the caller's to close (the mapping does not need it).
  static absl::StatusOr<std::shared_ptr<SealedMapping>> MapDescriptor(int fd,
                                                                      const std::string& what,
                                                                      uid_t owner_uid,
                                                                      uint64_t size_bytes);
  SealedMapping(const SealedMapping&) = delete;
  SealedMapping& operator=(const SealedMapping&) = delete;
  ~SealedMapping();

  absl::Span<std::byte> bytes() const { return {data_, size_}; }

 private:
  SealedMapping(std::byte* data, size_t size) : data_(data), size_(size) {}
  std::byte* const data_;
  const size_t size_;
};

}  // namespace ringsync
