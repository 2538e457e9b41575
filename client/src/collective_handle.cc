#include "ringsync/collective_handle.h"

#include "client/src/pending_collective.h"

namespace ringsync {

CollectiveHandle::~CollectiveHandle() {
  if (pending_ != nullptr) pending_->Wait().IgnoreError();
}

CollectiveHandle& CollectiveHandle::operator=(CollectiveHandle&& other) noexcept {
  if (this != &other) {
    if (pending_ != nullptr) pending_->Wait().IgnoreError();
    pending_ = std::move(other.pending_);
  }
  return *this;
}

bool CollectiveHandle::Ready() const { return pending_ == nullptr || pending_->Ready(); }

absl::Status CollectiveHandle::Wait() {
  if (pending_ == nullptr) {
    return absl::FailedPreconditionError("Wait() on an empty CollectiveHandle (moved from?)");
  }
  return pending_->Wait();
}

absl::Status CollectiveHandle::Wait(absl::Duration timeout) {
  if (pending_ == nullptr) {
    return absl::FailedPreconditionError("Wait() on an empty CollectiveHandle (moved from?)");
  }
  return pending_->Wait(timeout);
}

}  // namespace ringsync
