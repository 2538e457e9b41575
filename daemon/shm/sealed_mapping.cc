#include "daemon/shm/sealed_mapping.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"

namespace ringsync {
namespace {

// st_blocks counts 512-byte units whatever the file system's block size.
constexpr uint64_t kStatBlockBytes = 512;
constexpr int kRequiredSeals = F_SEAL_SHRINK | F_SEAL_GROW;

absl::Status Invalid(absl::string_view what, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("shared memory ", what, ": ", why));
}

// Checks an opened descriptor before it is mapped (see the header: why each check).
absl::Status CheckDescriptor(int fd, const std::string& what, uid_t owner_uid, uint64_t size) {
  struct stat info {};
  if (::fstat(fd, &info) != 0) return Invalid(what, absl::StrCat("fstat: ", std::strerror(errno)));
  if (!S_ISREG(info.st_mode)) return Invalid(what, "not a regular file (a memfd is expected)");
  if (info.st_uid != owner_uid) {
    return absl::PermissionDeniedError(absl::StrCat(
        "shared memory ", what, ": the memory belongs to uid ", info.st_uid,
        ", not to the attached training process (uid ", owner_uid, ")"));
  }
  const int seals = ::fcntl(fd, F_GET_SEALS);
  if (seals < 0 || (seals & kRequiredSeals) != kRequiredSeals) {
    return Invalid(what, "not a memfd sealed against shrinking and growing (memfd_create with "
                         "MFD_ALLOW_SEALING, then F_SEAL_SHRINK | F_SEAL_GROW): the worker "
                         "maps only memory whose size cannot change under it");
  }
  if (static_cast<uint64_t>(info.st_size) != size) {
    return Invalid(what, absl::StrCat("it holds ", info.st_size, " bytes, not the ", size,
                                      " the request says"));
  }
  const uint64_t allocated = static_cast<uint64_t>(info.st_blocks) * kStatBlockBytes;
  if (allocated < size) {
    return Invalid(what, absl::StrCat("only ", allocated, " of its ", size,
                                      " bytes are allocated: allocate them (fallocate) before "
                                      "sealing"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::shared_ptr<SealedMapping>> SealedMapping::Map(
    const std::string& fd_path, uid_t owner_uid, uint64_t size_bytes) {
  if (size_bytes == 0 || size_bytes > std::numeric_limits<size_t>::max()) {
    return Invalid(fd_path, absl::StrCat("size ", size_bytes, " is out of range"));
  }
  // O_NONBLOCK: a FIFO behind the descriptor must not hang the worker before fstat.
  const int fd = ::open(fd_path.c_str(), O_RDWR | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "shared memory ", fd_path, ": cannot open the other process's descriptor (",
        std::strerror(errno), "); sharing memory needs both processes in the same pid "
        "namespace, as the same user"));
  }
  absl::StatusOr<std::shared_ptr<SealedMapping>> mapped =
      MapDescriptor(fd, fd_path, owner_uid, size_bytes);
  ::close(fd);  // the mapping keeps the memory
  return mapped;
}

absl::StatusOr<std::shared_ptr<SealedMapping>> SealedMapping::MapDescriptor(
    int fd, const std::string& what, uid_t owner_uid, uint64_t size_bytes) {
  if (size_bytes == 0 || size_bytes > std::numeric_limits<size_t>::max()) {
    return Invalid(what, absl::StrCat("size ", size_bytes, " is out of range"));
  }
  if (absl::Status checked = CheckDescriptor(fd, what, owner_uid, size_bytes); !checked.ok()) {
    return checked;
  }
  void* data = ::mmap(nullptr, size_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (data == MAP_FAILED) return Invalid(what, absl::StrCat("mmap: ", std::strerror(errno)));
  return std::shared_ptr<SealedMapping>(
      new SealedMapping(static_cast<std::byte*>(data), static_cast<size_t>(size_bytes)));
}

SealedMapping::~SealedMapping() { ::munmap(data_, size_); }

}  // namespace ringsync
