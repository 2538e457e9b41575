#include "client/src/staging_buffers.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"

namespace ringsync::internal {
namespace {

// A refusal that the next registration would meet again.
bool Lasting(const absl::Status& status) {
  return !absl::IsResourceExhausted(status) && !absl::IsDeadlineExceeded(status) &&
         !absl::IsUnavailable(status);
}

}  // namespace

std::vector<std::shared_ptr<RegisteredMemory>> StagingBuffers::TakeDropped() {
  absl::MutexLock lock(&mu_);
  return std::exchange(to_drop_, {});
}

absl::StatusOr<std::shared_ptr<RegisteredMemory>> StagingBuffers::Acquire(size_t size_bytes) {
  TakeDropped();  // dropped here, on the caller's thread
  return idle_.TakeOrMake(size_bytes, [&] { return Register(size_bytes); });
}

absl::StatusOr<std::shared_ptr<RegisteredMemory>> StagingBuffers::Register(size_t size_bytes) {
  {
    absl::MutexLock lock(&mu_);
    if (off_.has_value()) return *off_;
  }
  absl::StatusOr<std::shared_ptr<RegisteredMemory>> made = register_memory_(size_bytes);
  if (!made.ok() && Lasting(made.status())) {
    absl::MutexLock lock(&mu_);
    if (!off_.has_value()) {  // another thread's refusal may have turned it off already
      off_ = absl::Status(made.status().code(),
                          absl::StrCat("staging in registered memory is off for this client: ",
                                       made.status().message()));
      spdlog::info("ringsync: {}; tensors are staged in shared-memory files instead",
                   std::string(off_->message()));
    }
  }
  return made;
}

void StagingBuffers::Release(std::shared_ptr<RegisteredMemory> buffer) {
  std::vector<std::shared_ptr<RegisteredMemory>> evicted = idle_.Put(std::move(buffer));
  if (evicted.empty()) return;
  absl::MutexLock lock(&mu_);
  for (auto& each : evicted) to_drop_.push_back(std::move(each));
}

size_t StagingBuffers::DropIdle() {
  // Both vectors, and the buffers in them, go at the end of the statement.
  return Idle::BytesOf(TakeDropped()) + Idle::BytesOf(idle_.TakeAll());
}

void StagingBuffers::Retire(std::shared_ptr<RegisteredMemory> buffer) {
  idle_.Forget(buffer->size());
  absl::MutexLock lock(&mu_);
  to_drop_.push_back(std::move(buffer));
}

}  // namespace ringsync::internal
