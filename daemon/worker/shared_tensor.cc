#include "daemon/worker/shared_tensor.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace ringsync {
namespace {


absl::Status Invalid(const std::string& path, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("shared tensor '", path, "': ", why));
}

}  // namespace

absl::StatusOr<SharedTensor> SharedTensor::Map(const std::string& allowed_dir,
                                               const std::string& path, uint64_t offset,
                                               uint64_t size, bool keep_name) {
  const std::string dir = absl::EndsWith(allowed_dir, "/") ? allowed_dir : allowed_dir + "/";
  if (!absl::StartsWith(path, dir)) return Invalid(path, absl::StrCat("not inside ", dir));
  const std::string name = path.substr(dir.size());
  if (!absl::StartsWith(name, SharedTensor::kNamePrefix) || absl::StrContains(name, "/") || name.size() > 200) {
    return Invalid(path, absl::StrCat("the file name must start with '", SharedTensor::kNamePrefix,
                                      "' and name a file directly inside ", dir));
  }
  if (size == 0) return SharedTensor(nullptr, 0, nullptr, 0);
  const int fd = ::open(path.c_str(), O_RDWR | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return Invalid(path, absl::StrCat("cannot open: ", std::strerror(errno)));
  struct stat info {};
  if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    ::close(fd);
    return Invalid(path, "not a regular file");
  }
  const uint64_t file_size = static_cast<uint64_t>(info.st_size);
  if (offset > file_size || size > file_size - offset) {
    ::close(fd);
    return Invalid(path, absl::StrCat("region [", offset, ", +", size, ") exceeds the file's ",
                                      file_size, " bytes"));
  }
  const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  const uint64_t map_offset = offset - offset % page;
  const size_t map_size = static_cast<size_t>(size + (offset - map_offset));
  // MAP_POPULATE: the client wrote every page already; map them all at once rather than
  // taking one fault per page while the ring runs.
  void* mapping = ::mmap(nullptr, map_size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE,
                         fd, static_cast<off_t>(map_offset));
  const int map_errno = errno;
  ::close(fd);
  if (mapping == MAP_FAILED) return Invalid(path, absl::StrCat("mmap: ", std::strerror(map_errno)));
  // Both sides hold mappings now, so the name is no longer needed: removing it here means
  // a training process killed mid-collective leaves no file behind in /dev/shm.
  if (!keep_name) ::unlink(path.c_str());
  return SharedTensor(mapping, map_size, static_cast<std::byte*>(mapping) + (offset - map_offset),
                      static_cast<size_t>(size));
}

SharedTensor::SharedTensor(SharedTensor&& other) noexcept { *this = std::move(other); }

SharedTensor& SharedTensor::operator=(SharedTensor&& other) noexcept {
  if (this != &other) {
    Unmap();
    mapping_ = std::exchange(other.mapping_, nullptr);
    mapping_size_ = std::exchange(other.mapping_size_, 0);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

SharedTensor::~SharedTensor() { Unmap(); }

void SharedTensor::Unmap() {
  if (mapping_ != nullptr) ::munmap(mapping_, mapping_size_);
  mapping_ = nullptr;
}

}  // namespace ringsync
