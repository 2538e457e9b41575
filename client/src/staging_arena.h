// StagingArena: one registered buffer (registered_memory.h) that tensors below the shared-
// memory threshold are staged in, one slice each, in turn.
//
// Why: inline, a tensor is copied into the request, through the call channel, into the
// worker's job, back into an answer and out again, in memory allocated for each call
// (which on a VM whose page faults cost ~11 us each was most of a 64 KiB all-reduce's
// time). Staged in registered memory the worker reduces it where it lies: one copy in,
// one out, into memory that stays mapped. One arena for all sizes, not a buffer per size
// (staging_buffers.h), because a model all-reduces hundreds of differently sized small
// tensors per step, and each registration is a round trip to the worker and counts
// against its --max_registered_buffers.
//
// Slices are handed out in ring order (a collective's slice lies after the previous
// one's, wrapping at the end) and their space comes back when every older slice has come
// back too: collectives mostly complete in the order they started, so this wastes little
// and needs no free list. A slice that does not fit now is refused (the caller sends the
// tensor inline, as before). When no slice is out, the next begins at the arena's start
// again: a training loop that waits for each collective stages every tensor in the same
// pages, which stay in cache and in both processes' page tables, instead of walking the
// whole arena (on a VM whose first touch of a mapped page costs ~5-11 us, the first walk
// through a 16 MiB arena doubled a 64 KiB all-reduce's time for its first 256 calls).
//
// A slice the worker may still write into (its collective's RPC was cancelled) is
// retired: the arena hands out nothing more, and its memory is dropped once its last slice
// is gone (the worker keeps its own mapping while the collective runs).
//
// Thread-safety: all methods are thread-safe; a Slice is used by one thread at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "client/src/registered_memory.h"

namespace ringsync::internal {

class StagingArena : public std::enable_shared_from_this<StagingArena> {
 public:
  // Slices start at multiples of this (what the widest dtype and the vector loops want).
  static constexpr size_t kAlignment = 64;

  // `memory` is registered with the worker.
  static std::shared_ptr<StagingArena> Create(std::shared_ptr<RegisteredMemory> memory);

  // [offset, offset + size) of the arena's buffer, held until the Slice is destroyed.
  class Slice {
   public:
    Slice(Slice&& other) noexcept;
    Slice& operator=(Slice&& other) noexcept;
    Slice(const Slice&) = delete;
    ~Slice();

    std::byte* data() const;
    uint64_t buffer_id() const;
    uint64_t offset() const { return offset_; }
    // The worker may still write here: the arena's space is never handed out again.
    void Retire();

   private:
    friend class StagingArena;
    Slice(std::shared_ptr<StagingArena> arena, uint64_t position, uint64_t offset)
        : arena_(std::move(arena)), position_(position), offset_(offset) {}

    std::shared_ptr<StagingArena> arena_;  // null once moved from
    uint64_t position_;  // the slice's place in the ring order (see Release)
    uint64_t offset_;
    bool retired_ = false;
  };

  // A slice of `size_bytes` (> 0); nullopt when it does not fit now or the arena retired.
  std::optional<Slice> Take(size_t size_bytes);

  bool retired() const;
  size_t capacity() const { return memory_->size(); }

 private:
  explicit StagingArena(std::shared_ptr<RegisteredMemory> memory) : memory_(std::move(memory)) {}
  void Release(uint64_t position, bool retire);

  const std::shared_ptr<RegisteredMemory> memory_;
  mutable absl::Mutex mu_;
  // Positions grow without wrapping; a position's offset is position % capacity. Slices
  // out, oldest first: where each begins and whether it came back.
  struct Held {
    uint64_t begin;
    bool returned;
  };
  std::deque<Held> held_ ABSL_GUARDED_BY(mu_);
  uint64_t head_ ABSL_GUARDED_BY(mu_) = 0;  // where the next slice may begin
  uint64_t tail_ ABSL_GUARDED_BY(mu_) = 0;  // where the oldest held slice begins (head_ if none)
  bool retired_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace ringsync::internal
