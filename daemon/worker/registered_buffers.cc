#include "daemon/worker/registered_buffers.h"

#include <limits>

#include "absl/strings/str_cat.h"

namespace ringsync {
namespace {

absl::Status Invalid(absl::string_view what, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("registered buffer ", what, ": ", why));
}

absl::Status TooMany(size_t registered) {
  return absl::ResourceExhaustedError(absl::StrCat(
      "the training process already has ", registered, " registered buffers, the worker's "
      "--max_registered_buffers; free one first"));
}

}  // namespace

absl::StatusOr<uint64_t> RegisteredBuffers::Register(pid_t pid, uid_t uid, int64_t fd,
                                                     uint64_t size_bytes) {
  if (pid <= 0) {
    return absl::FailedPreconditionError(
        "registered buffers need the training process's pid, which the worker cannot see "
        "(another pid namespace, or a client over TCP): hand the descriptor over the "
        "worker's descriptor socket instead");
  }
  if (fd < 0 || fd > std::numeric_limits<int>::max()) {
    return Invalid(absl::StrCat("fd ", fd), "not a descriptor number");
  }
  return Add(size_bytes, [&] {
    return SealedMapping::Map(absl::StrCat("/proc/", pid, "/fd/", fd), uid, size_bytes);
  });
}

absl::StatusOr<uint64_t> RegisteredBuffers::RegisterDescriptor(uid_t uid, const UniqueFd& fd,
                                                               uint64_t size_bytes) {
  return Add(size_bytes, [&] {
    return SealedMapping::MapDescriptor(fd.get(), "(a descriptor the client handed over)", uid,
                                        size_bytes);
  });
}

absl::StatusOr<uint64_t> RegisteredBuffers::Add(
    uint64_t size_bytes,
    absl::FunctionRef<absl::StatusOr<std::shared_ptr<SealedMapping>>()> map) {
  if (size_bytes == 0 || size_bytes > limits_.max_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "registered buffer of ", size_bytes, " bytes: it must hold 1..", limits_.max_bytes,
        " bytes (the worker's --max_registered_buffer_bytes)"));
  }
  {
    absl::MutexLock lock(&mu_);
    if (buffers_.size() >= limits_.max_buffers) return TooMany(buffers_.size());
  }
  absl::StatusOr<std::shared_ptr<SealedMapping>> mapping = map();
  if (!mapping.ok()) return mapping.status();
  absl::MutexLock lock(&mu_);
  // Another registration may have won the race.
  if (buffers_.size() >= limits_.max_buffers) return TooMany(buffers_.size());
  const uint64_t id = next_id_++;
  buffers_.emplace(id, *std::move(mapping));
  return id;
}

absl::Status RegisteredBuffers::Release(uint64_t id) {
  absl::MutexLock lock(&mu_);
  if (buffers_.erase(id) == 0) {
    return absl::NotFoundError(absl::StrCat("no registered buffer ", id));
  }
  return absl::OkStatus();
}

void RegisteredBuffers::Clear() {
  absl::flat_hash_map<uint64_t, std::shared_ptr<SealedMapping>> dropped;  // unmapped unlocked
  absl::MutexLock lock(&mu_);
  dropped.swap(buffers_);
}

uint64_t RegisteredBuffers::bytes() const {
  absl::MutexLock lock(&mu_);
  uint64_t total = 0;
  for (const auto& [id, mapping] : buffers_) total += mapping->bytes().size();
  return total;
}

size_t RegisteredBuffers::size() const {
  absl::MutexLock lock(&mu_);
  return buffers_.size();
}

absl::StatusOr<RegisteredBuffers::Slice> RegisteredBuffers::Find(uint64_t id, uint64_t offset,
                                                                 uint64_t size_bytes) const {
  std::shared_ptr<SealedMapping> mapping;
  {
    absl::MutexLock lock(&mu_);
    auto it = buffers_.find(id);
    if (it == buffers_.end()) {
      return Invalid(absl::StrCat(id), "not registered by the attached training process (freed, "
                                       "or registered before it re-attached?)");
    }
    mapping = it->second;
  }
  const absl::Span<std::byte> all = mapping->bytes();
  if (offset > all.size() || size_bytes > all.size() - offset) {
    return Invalid(absl::StrCat(id), absl::StrCat("range [", offset, ", +", size_bytes,
                                                  ") exceeds its ", all.size(), " bytes"));
  }
  Slice slice;
  slice.bytes = all.subspan(offset, size_bytes);
  slice.mapping = std::move(mapping);
  return slice;
}

}  // namespace ringsync
