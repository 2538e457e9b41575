// SharedMemoryRegion: a file under /dev/shm, mapped read-write, removed on destruction.
//
// Large tensors travel to the worker this way instead of through the socket: the SDK
// copies the caller's tensor in, names the file in the request, the worker maps the same
// file and writes the result in place, and the SDK copies the result back out. The
// worker accepts only files under /dev/shm whose name starts with "ringsync-".
//
// Thread-safety: a region is owned by one thread at a time; distinct regions are
// independent. Create may be called concurrently.
#pragma once

#include <cstddef>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ringsync::internal {

class SharedMemoryRegion {
 public:
  static constexpr absl::string_view kDefaultDirectory = "/dev/shm";
  static constexpr absl::string_view kNamePrefix = "ringsync-";

  // Creates `directory`/ringsync-<pid>-<counter>-<random> (a fresh name on collision),
  // with room for `size_bytes` reserved up front, so a full /dev/shm fails here with
  // ResourceExhausted rather than with SIGBUS on first touch. REQUIRES: size_bytes > 0.
  static absl::StatusOr<SharedMemoryRegion> Create(size_t size_bytes,
                                                   absl::string_view directory = kDefaultDirectory);

  // Creates exactly `path` (O_CREAT | O_EXCL, mode 0600): AlreadyExists when it exists.
  static absl::StatusOr<SharedMemoryRegion> CreateAt(std::string path, size_t size_bytes);

  SharedMemoryRegion(SharedMemoryRegion&& other) noexcept;
  SharedMemoryRegion& operator=(SharedMemoryRegion&& other) noexcept;
  SharedMemoryRegion(const SharedMemoryRegion&) = delete;
  SharedMemoryRegion& operator=(const SharedMemoryRegion&) = delete;
  // Unmaps and removes the file.
  ~SharedMemoryRegion();

  const std::string& path() const { return path_; }
  void* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  SharedMemoryRegion(std::string path, void* data, size_t size)
      : path_(std::move(path)), data_(data), size_(size) {}
  void Release();

  std::string path_;
  void* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace ringsync::internal
