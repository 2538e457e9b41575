// RegisteredMemory: the memory behind a RegisteredBuffer (ringsync/registered_buffer.h) —
// a memfd, sized, its pages allocated, sealed against shrinking and growing (what the
// worker checks before it maps it), mapped read-write here with every page in place (no
// fault on first touch) — and its registration with the worker, which it ends on
// destruction through the registry it was added to.
//
// Thread-safety: immutable after Create, except the registration set once before the
// memory is handed out.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"

namespace ringsync::internal {

class RegisteredBufferRegistry;

class RegisteredMemory {
 public:
  // REQUIRES nothing: InvalidArgument for 0 bytes, ResourceExhausted when the memory
  // cannot be had.
  static absl::StatusOr<std::shared_ptr<RegisteredMemory>> Create(size_t size_bytes);
  RegisteredMemory(const RegisteredMemory&) = delete;
  RegisteredMemory& operator=(const RegisteredMemory&) = delete;
  // Unregisters (when registered), unmaps, closes.
  ~RegisteredMemory();

  int fd() const { return fd_; }
  void* data() const { return data_; }
  size_t size() const { return size_; }
  // The worker's id for it; 0 until registered.
  uint64_t id() const { return id_; }

  // Called once the worker registered it as `id` in `registry`.
  void SetRegistration(std::shared_ptr<RegisteredBufferRegistry> registry, uint64_t id);

 private:
  RegisteredMemory(int fd, void* data, size_t size) : fd_(fd), data_(data), size_(size) {}

  const int fd_;
  void* const data_;
  const size_t size_;
  std::shared_ptr<RegisteredBufferRegistry> registry_;
  uint64_t id_ = 0;
};

}  // namespace ringsync::internal
