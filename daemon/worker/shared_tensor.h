// SharedTensor: a tensor the training process placed in a shared-memory file, mapped
// read-write into the worker so large gradients never travel through the socket.
//
// Only files directly inside the allowed directory (default /dev/shm) whose names
// start with "ringsync-" are accepted, so a client cannot make the worker map anything
// else; the region must lie inside the file. Once mapped, the file's name is removed
// (the client holds its own mapping), so nothing leaks if the client dies — unless the
// client reuses the file for later collectives (`keep_name`), in which case whoever
// tracks the client's files removes them when it detaches.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace ringsync {

class SharedTensor {
 public:
  // Every shared file's name starts with this (the SDK's files: ringsync-<pid>-...).
  static constexpr absl::string_view kNamePrefix = "ringsync-";

  // Maps [offset, offset + size) of `path`. REQUIRES nothing: every argument is checked.
  static absl::StatusOr<SharedTensor> Map(const std::string& allowed_dir, const std::string& path,
                                          uint64_t offset, uint64_t size, bool keep_name = false);

  SharedTensor() = default;  // maps nothing
  SharedTensor(SharedTensor&& other) noexcept;
  SharedTensor& operator=(SharedTensor&& other) noexcept;
  SharedTensor(const SharedTensor&) = delete;
  SharedTensor& operator=(const SharedTensor&) = delete;
  ~SharedTensor();

  absl::Span<std::byte> bytes() const { return {data_, size_}; }

 private:
  SharedTensor(void* mapping, size_t mapping_size, std::byte* data, size_t size)
      : mapping_(mapping), mapping_size_(mapping_size), data_(data), size_(size) {}
  void Unmap();

  void* mapping_ = nullptr;
  size_t mapping_size_ = 0;
  std::byte* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace ringsync
