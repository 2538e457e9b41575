// SharedTensor: a tensor the training process placed in a shared-memory file, so that
// large gradients never travel through the socket. The worker does not map the file: it
// reads the region into its own memory when the collective starts (pread) and writes the
// result back once the ring completed it (pwrite).
//
// Why copies and not a mapping ("no SIGBUS, ever"): a mapped file that its owner
// truncates, or a sparse one on a full tmpfs, raises SIGBUS on whichever thread touches
// the page — the reducer's, or gRPC's while it sends a segment — and the worker dies. A
// sigsetjmp guard would have to wrap every leaf that touches the bytes, in core/ and in
// gRPC's threads, and jump across C++ frames; a process-wide handler that patches pages
// is global state inside a signal handler. pread and pwrite cannot fault: a file
// truncated under the worker is a short read, reported as an error. The price is one
// copy in and one out per collective (memory bandwidth, small beside the ring's
// 2(N-1)/N x S through gRPC) and the running collective's bytes held in the worker's
// memory, as for an inline tensor; a queued one holds only a descriptor.
//
// Open checks, before anything is read or unlinked: the file lies directly inside the
// allowed directory (default /dev/shm) with a name of the client's own (ringsync-<pid>-
// when the client's pid is visible, else ringsync-), is a regular file (no symlink, no
// FIFO), belongs to the client's uid, holds [offset, offset + size) and has it
// allocated (not sparse). Then the name is removed (the client keeps its own mapping),
// so nothing leaks if the client dies — unless the client reuses the file (`keep_name`);
// the worker removes those when the client detaches.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace ringsync {

// Whose files a client may name.
struct SharedFileRules {
  std::string allowed_dir = "/dev/shm";
  uid_t owner_uid = 0;  // the attached client's uid (SO_PEERCRED)
  pid_t owner_pid = 0;  // its pid; 0 when not visible (another pid namespace)
};

class SharedTensor {
 public:
  // Every shared file's name starts with this (the SDK's files: ringsync-<pid>-...).
  static constexpr absl::string_view kNamePrefix = "ringsync-";

  // Opens [offset, offset + size) of `path`. REQUIRES nothing: every argument is checked;
  // InvalidArgument (or PermissionDenied for a file of another user) names what is wrong.
  static absl::StatusOr<SharedTensor> Open(const SharedFileRules& rules, const std::string& path,
                                           uint64_t offset, uint64_t size, bool keep_name = false);

  SharedTensor() = default;  // holds nothing
  SharedTensor(SharedTensor&& other) noexcept;
  SharedTensor& operator=(SharedTensor&& other) noexcept;
  SharedTensor(const SharedTensor&) = delete;
  SharedTensor& operator=(const SharedTensor&) = delete;
  ~SharedTensor();

  uint64_t size() const { return size_; }
  // Copies the region into `out` (size() bytes). DataLoss when the file no longer holds
  // the region (its owner truncated it).
  absl::Status ReadInto(absl::Span<std::byte> out) const;
  // Copies `in` (size() bytes) into the region; DataLoss when the file was truncated.
  absl::Status WriteFrom(absl::Span<const std::byte> in) const;

 private:
  SharedTensor(int fd, std::string path, uint64_t offset, uint64_t size)
      : fd_(fd), path_(std::move(path)), offset_(offset), size_(size) {}
  // DataLoss unless the file still holds the region.
  absl::Status CheckStillHeld() const;
  void Close();

  int fd_ = -1;
  std::string path_;  // for messages
  uint64_t offset_ = 0;
  uint64_t size_ = 0;
};

}  // namespace ringsync
