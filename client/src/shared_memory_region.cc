#include "client/src/shared_memory_region.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <limits>
#include <utility>

#include "absl/random/random.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace ringsync::internal {
namespace {

// Names are unique per process by the counter; the random part keeps a stale file of an
// earlier process with the same pid from colliding, and O_EXCL catches the rest.
constexpr int kCreateAttempts = 8;

absl::Status ErrnoError(int error, absl::string_view what, absl::string_view path) {
  const std::string message = absl::StrCat(what, " ", path, ": ", std::strerror(error));
  if (error == EEXIST) return absl::AlreadyExistsError(message);
  if (error == ENOMEM) return absl::ResourceExhaustedError(message);
  if (error == ENOSPC) {
    return absl::ResourceExhaustedError(absl::StrCat(
        message,
        " (shared memory is full: a container's /dev/shm is 64 MiB unless started "
        "with a larger --shm-size; or raise ClientOptions::shared_memory_threshold_bytes "
        "so large tensors travel inline)"));
  }
  if (error == EACCES || error == EPERM) return absl::PermissionDeniedError(message);
  if (error == ENOENT) return absl::NotFoundError(message);
  return absl::InternalError(message);
}

// Fills the first `size` bytes of `fd` with zeros; errno says why when it fails.
absl::Status WriteZeros(int fd, size_t size) {
  const std::string zeros(size_t{1} << 20, '\0');
  for (size_t done = 0; done < size;) {
    const ssize_t put = pwrite(fd, zeros.data(), std::min(zeros.size(), size - done),
                               static_cast<off_t>(done));
    if (put < 0 && errno == EINTR) continue;
    if (put <= 0) return absl::InternalError("write");
    done += static_cast<size_t>(put);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<SharedMemoryRegion> SharedMemoryRegion::Create(size_t size_bytes,
                                                              absl::string_view directory) {
  static std::atomic<uint64_t> counter{0};
  absl::BitGen random;
  absl::Status last;
  for (int attempt = 0; attempt < kCreateAttempts; ++attempt) {
    std::string path = absl::StrFormat("%s/%s%d-%d-%08x", directory, kNamePrefix, getpid(),
                                       counter.fetch_add(1, std::memory_order_relaxed),
                                       absl::Uniform<uint32_t>(random));
    absl::StatusOr<SharedMemoryRegion> region = CreateAt(std::move(path), size_bytes);
    if (!absl::IsAlreadyExists(region.status())) return region;
    last = region.status();
  }
  return last;
}

absl::StatusOr<SharedMemoryRegion> SharedMemoryRegion::CreateAt(std::string path,
                                                                size_t size_bytes) {
  if (size_bytes == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("shared-memory region ", path, " must not be empty"));
  }
  if (size_bytes > static_cast<size_t>(std::numeric_limits<off_t>::max())) {
    return absl::InvalidArgumentError(
        absl::StrCat("shared-memory region of ", size_bytes, " bytes is too large"));
  }
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return ErrnoError(errno, "cannot create", path);
  // From here on the file is ours: remove it on every failure.
  auto fail = [&](int error, absl::string_view what) {
    close(fd);
    unlink(path.c_str());
    return ErrnoError(error, what, path);
  };
  // posix_fallocate both sizes the file and reserves its pages on tmpfs. The worker
  // refuses sparse files: their pages would be taken from a tmpfs that may be full by
  // the time the result is written.
  const off_t length = static_cast<off_t>(size_bytes);
  if (const int error = posix_fallocate(fd, 0, length); error != 0) {
    if (error != EOPNOTSUPP && error != EINVAL) return fail(error, "cannot reserve space for");
    // A file system without fallocate: write the zeros, which allocates as well.
    if (absl::Status written = WriteZeros(fd, size_bytes); !written.ok()) {
      return fail(errno, "cannot reserve space for");
    }
  }
  void* data = mmap(nullptr, size_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (data == MAP_FAILED) return fail(errno, "cannot map");
  close(fd);  // the mapping keeps the file open
  return SharedMemoryRegion(std::move(path), data, size_bytes);
}

SharedMemoryRegion::SharedMemoryRegion(SharedMemoryRegion&& other) noexcept
    : path_(std::move(other.path_)),
      data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)) {
  other.path_.clear();
}

SharedMemoryRegion& SharedMemoryRegion::operator=(SharedMemoryRegion&& other) noexcept {
  if (this != &other) {
    Release();
    path_ = std::exchange(other.path_, std::string());
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

SharedMemoryRegion::~SharedMemoryRegion() { Release(); }

void SharedMemoryRegion::Release() {
  if (data_ != nullptr) munmap(data_, size_);
  if (!path_.empty()) unlink(path_.c_str());
  data_ = nullptr;
  size_ = 0;
  path_.clear();
}

}  // namespace ringsync::internal
