#include "client/src/staging_arena.h"

#include <utility>

namespace ringsync::internal {

std::shared_ptr<StagingArena> StagingArena::Create(std::shared_ptr<RegisteredMemory> memory) {
  return std::shared_ptr<StagingArena>(new StagingArena(std::move(memory)));
}

StagingArena::Slice::Slice(Slice&& other) noexcept
    : arena_(std::move(other.arena_)),
      position_(other.position_),
      offset_(other.offset_),
      retired_(other.retired_) {}

StagingArena::Slice& StagingArena::Slice::operator=(Slice&& other) noexcept {
  if (this != &other) {
    if (arena_ != nullptr) arena_->Release(position_, retired_);
    arena_ = std::move(other.arena_);
    position_ = other.position_;
    offset_ = other.offset_;
    retired_ = other.retired_;
  }
  return *this;
}

StagingArena::Slice::~Slice() {
  if (arena_ != nullptr) arena_->Release(position_, retired_);
}

std::byte* StagingArena::Slice::data() const {
  return static_cast<std::byte*>(arena_->memory_->data()) + offset_;
}

uint64_t StagingArena::Slice::buffer_id() const { return arena_->memory_->id(); }

void StagingArena::Slice::Retire() { retired_ = true; }

std::optional<StagingArena::Slice> StagingArena::Take(size_t size_bytes) {
  const uint64_t capacity = memory_->size();
  const uint64_t size = (size_bytes + kAlignment - 1) / kAlignment * kAlignment;
  if (size_bytes == 0 || size > capacity) return std::nullopt;
  absl::MutexLock lock(&mu_);
  if (retired_) return std::nullopt;
  uint64_t begin = head_;
  if (held_.empty()) {
    // Nothing is held: begin again at the start (the next lap), so that a caller with one
    // collective out at a time keeps reusing the same pages.
    begin += (capacity - begin % capacity) % capacity;
    tail_ = begin;
  } else if (begin % capacity + size > capacity) {
    // A slice never wraps: one that would cross the end begins at the next lap.
    begin += capacity - begin % capacity;
  }
  if (begin + size - tail_ > capacity) return std::nullopt;  // older slices still hold it
  held_.push_back(Held{begin, false});
  head_ = begin + size;
  return Slice(shared_from_this(), begin, begin % capacity);
}

bool StagingArena::retired() const {
  absl::MutexLock lock(&mu_);
  return retired_;
}

void StagingArena::Release(uint64_t position, bool retire) {
  absl::MutexLock lock(&mu_);
  if (retire) retired_ = true;
  for (Held& held : held_) {
    if (held.begin == position) {
      held.returned = true;
      break;
    }
  }
  while (!held_.empty() && held_.front().returned) held_.pop_front();
  tail_ = held_.empty() ? head_ : held_.front().begin;
}

}  // namespace ringsync::internal
