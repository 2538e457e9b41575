#include "client/src/registered_memory.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "client/src/registered_buffer_registry.h"

namespace ringsync::internal {
namespace {

absl::Status Failed(absl::string_view what, int error, size_t size) {
  const std::string message = absl::StrCat("cannot allocate a registered buffer of ", size,
                                           " bytes: ", what, ": ", std::strerror(error));
  if (error == ENOMEM || error == ENOSPC || error == EMFILE || error == ENFILE) {
    return absl::ResourceExhaustedError(message);
  }
  return absl::InternalError(message);
}

}  // namespace

absl::StatusOr<std::shared_ptr<RegisteredMemory>> RegisteredMemory::Create(size_t size_bytes) {
  if (size_bytes == 0 || size_bytes > static_cast<size_t>(std::numeric_limits<off_t>::max())) {
    return absl::InvalidArgumentError(
        absl::StrCat("a registered buffer of ", size_bytes, " bytes: it must hold at least one"));
  }
  const int fd = ::memfd_create("ringsync-registered", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) return Failed("memfd_create", errno, size_bytes);
  auto fail = [&](absl::string_view what) {
    const int error = errno;
    ::close(fd);
    return Failed(what, error, size_bytes);
  };
  if (::ftruncate(fd, static_cast<off_t>(size_bytes)) != 0) return fail("ftruncate");
  // Allocated now, so that neither process can fault on a page the system cannot give.
  if (const int error = ::posix_fallocate(fd, 0, static_cast<off_t>(size_bytes)); error != 0) {
    errno = error;
    return fail("fallocate");
  }
  // Its size is fixed for good: the worker maps only memory sealed so.
  if (::fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    return fail("seal");
  }
  // Mapped in full at once, not page by page on first touch: the first copy into a staging
  // buffer otherwise took a fault per page while the ring waited for it.
  void* data =
      ::mmap(nullptr, size_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  if (data == MAP_FAILED) return fail("mmap");
  return std::shared_ptr<RegisteredMemory>(new RegisteredMemory(fd, data, size_bytes));
}

void RegisteredMemory::SetRegistration(std::shared_ptr<RegisteredBufferRegistry> registry,
                                       uint64_t id) {
  registry_ = std::move(registry);
  id_ = id;
  registry_->Add(id_, data_, size_);
}

RegisteredMemory::~RegisteredMemory() {
  if (registry_ != nullptr) registry_->Remove(id_, data_);
  ::munmap(data_, size_);
  ::close(fd_);
}

}  // namespace ringsync::internal
