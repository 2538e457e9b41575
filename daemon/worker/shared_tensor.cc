#include "daemon/worker/shared_tensor.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace ringsync {
namespace {

constexpr size_t kMaxNameBytes = 200;
// st_blocks counts 512-byte units whatever the file system's block size.
constexpr uint64_t kStatBlockBytes = 512;

absl::Status Invalid(absl::string_view path, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("shared tensor '", path, "': ", why));
}

absl::Status CheckName(const SharedFileRules& rules, const std::string& path) {
  const std::string dir =
      absl::EndsWith(rules.allowed_dir, "/") ? rules.allowed_dir : rules.allowed_dir + "/";
  if (!absl::StartsWith(path, dir)) return Invalid(path, absl::StrCat("not inside ", dir));
  const absl::string_view name = absl::string_view(path).substr(dir.size());
  const std::string prefix =
      rules.owner_pid > 0 ? absl::StrCat(SharedTensor::kNamePrefix, rules.owner_pid, "-")
                          : std::string(SharedTensor::kNamePrefix);
  if (!absl::StartsWith(name, prefix) || absl::StrContains(name, "/") ||
      name.size() > kMaxNameBytes) {
    return Invalid(path, absl::StrCat("the file name must start with '", prefix,
                                      "' (the attached client's own files) and name a file "
                                      "directly inside ", dir));
  }
  return absl::OkStatus();
}

absl::Status CheckFile(const SharedFileRules& rules, const std::string& path,
                       const struct stat& info, uint64_t offset, uint64_t size) {
  if (!S_ISREG(info.st_mode)) return Invalid(path, "not a regular file");
  if (info.st_uid != rules.owner_uid) {
    return absl::PermissionDeniedError(
        absl::StrCat("shared tensor '", path, "': the file belongs to uid ", info.st_uid,
                     ", not to the attached training process (uid ", rules.owner_uid, ")"));
  }
  const uint64_t file_size = static_cast<uint64_t>(info.st_size);
  if (offset > file_size || size > file_size - offset) {
    return Invalid(path, absl::StrCat("region [", offset, ", +", size, ") exceeds the file's ",
                                      file_size, " bytes"));
  }
  // A sparse file would take memory from a tmpfs that may be full when the worker writes
  // the result; its creator reserves the space (posix_fallocate), as the SDK does.
  const uint64_t allocated = static_cast<uint64_t>(info.st_blocks) * kStatBlockBytes;
  if (allocated < offset + size) {
    return Invalid(path, absl::StrCat("the file is sparse (", allocated, " of ", file_size,
                                      " bytes allocated): reserve its space when creating it "
                                      "(posix_fallocate)"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<SharedTensor> SharedTensor::Open(const SharedFileRules& rules,
                                                const std::string& path, uint64_t offset,
                                                uint64_t size, bool keep_name) {
  if (absl::Status s = CheckName(rules, path); !s.ok()) return s;
  if (size == 0) return SharedTensor();
  // O_NONBLOCK: a FIFO planted under the name must not hang the worker before fstat
  // tells it apart.
  const int fd = ::open(path.c_str(), O_RDWR | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) return Invalid(path, absl::StrCat("cannot open: ", std::strerror(errno)));
  struct stat info {};
  if (::fstat(fd, &info) != 0) {
    ::close(fd);
    return Invalid(path, absl::StrCat("fstat: ", std::strerror(errno)));
  }
  if (absl::Status s = CheckFile(rules, path, info, offset, size); !s.ok()) {
    ::close(fd);
    return s;
  }
  // The worker holds the file open now, so the name is no longer needed: removing it
  // here means a training process killed mid-collective leaves no file behind.
  if (!keep_name) ::unlink(path.c_str());
  return SharedTensor(fd, path, offset, size);
}

SharedTensor::SharedTensor(SharedTensor&& other) noexcept { *this = std::move(other); }

SharedTensor& SharedTensor::operator=(SharedTensor&& other) noexcept {
  if (this != &other) {
    Close();
    fd_ = std::exchange(other.fd_, -1);
    path_ = std::move(other.path_);
    offset_ = std::exchange(other.offset_, 0);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

SharedTensor::~SharedTensor() { Close(); }

void SharedTensor::Close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

absl::Status SharedTensor::CheckStillHeld() const {
  struct stat info {};
  if (::fstat(fd_, &info) != 0) {
    return absl::DataLossError(absl::StrCat("shared tensor '", path_, "': fstat: ",
                                            std::strerror(errno)));
  }
  if (static_cast<uint64_t>(info.st_size) < offset_ + size_) {
    return absl::DataLossError(absl::StrCat(
        "shared tensor '", path_, "' was truncated to ", info.st_size,
        " bytes by its owner while the worker held it (region [", offset_, ", +", size_,
        ")); the training process must leave its shared file alone until the collective "
        "returns"));
  }
  return absl::OkStatus();
}

absl::Status SharedTensor::ReadInto(absl::Span<std::byte> out) const {
  for (uint64_t done = 0; done < size_;) {
    const ssize_t got = ::pread(fd_, out.data() + done, size_ - done,
                                static_cast<off_t>(offset_ + done));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      return absl::DataLossError(absl::StrCat("shared tensor '", path_, "': read: ",
                                              std::strerror(errno)));
    }
    if (got == 0) {
      absl::Status held = CheckStillHeld();
      return held.ok() ? absl::DataLossError(absl::StrCat("shared tensor '", path_,
                                                          "': short read"))
                       : held;
    }
    done += static_cast<uint64_t>(got);
  }
  return absl::OkStatus();
}

absl::Status SharedTensor::WriteFrom(absl::Span<const std::byte> in) const {
  // pwrite past the end would grow a truncated file back rather than fail.
  if (absl::Status s = CheckStillHeld(); !s.ok()) return s;
  for (uint64_t done = 0; done < size_;) {
    const ssize_t put = ::pwrite(fd_, in.data() + done, size_ - done,
                                 static_cast<off_t>(offset_ + done));
    if (put < 0 && errno == EINTR) continue;
    if (put <= 0) {
      return absl::DataLossError(absl::StrCat("shared tensor '", path_, "': write: ",
                                              std::strerror(errno)));
    }
    done += static_cast<uint64_t>(put);
  }
  return absl::OkStatus();
}

}  // namespace ringsync
