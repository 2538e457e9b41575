// StagingBuffers: registered memory (registered_memory.h) that the SDK copies a plain
// span's tensor into, so that the worker reduces it in place there.
//
// Why: a tensor staged in a shared-memory file is copied four times per collective (into
// the file here, into the worker's memory, back into the file, back into the span). In
// registered memory the worker reads and writes the staged bytes where they lie, so only
// this side's two copies remain, and the span keeps its copy semantics: it is written only
// once the collective succeeded, and untouched on failure.
//
// A buffer serves one collective at a time. Which idle buffer serves the next one and how
// many stay idle is IdleRegions' rule. Dropping a buffer tells the worker (a blocking call),
// so it never happens on gRPC's callback threads, where Release and Retire run: buffers
// to drop wait for the next Acquire (the caller's thread) or the pool's end.
//
// When the worker refuses a registration for a reason that will not change (it cannot
// open this process's memory: another pid namespace; an older worker), staging is off
// for the life of the pool and Acquire fails at once with that reason; the caller then
// stages in a file (shared_memory_pool.h). A passing refusal (too many buffers) fails
// only that Acquire.
//
// Thread-safety: all methods are thread-safe.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "client/src/idle_regions.h"
#include "client/src/registered_memory.h"

namespace ringsync::internal {

class StagingBuffers {
 public:
  static constexpr size_t kMinIdleBuffers = kMinIdleRegions;

  // `register_memory` makes and registers a buffer of the given size with the worker.
  using RegisterMemory =
      absl::AnyInvocable<absl::StatusOr<std::shared_ptr<RegisteredMemory>>(size_t size_bytes)>;
  explicit StagingBuffers(RegisterMemory register_memory)
      : register_memory_(std::move(register_memory)) {}

  // A registered buffer of at least `size_bytes` (> 0) that no collective uses.
  absl::StatusOr<std::shared_ptr<RegisteredMemory>> Acquire(size_t size_bytes);
  // Gives back a buffer the worker is done with (it answered the collective).
  void Release(std::shared_ptr<RegisteredMemory> buffer);
  // A buffer the worker may still write into (the collective's RPC was cancelled, and
  // the collective may still run there): never handed out again.
  void Retire(std::shared_ptr<RegisteredMemory> buffer);
  // Drops every idle buffer (and every one waiting to be dropped) now, on the caller's
  // thread, and says how many bytes went: they count against the worker's
  // --max_registered_buffers like any other, and give way to a registration that it would
  // refuse for them.
  size_t DropIdle();

  size_t idle_buffers() const { return idle_.size(); }

 private:
  // A new buffer from the worker, unless staging is off; turns it off on a lasting refusal.
  absl::StatusOr<std::shared_ptr<RegisteredMemory>> Register(size_t size_bytes);
  // Takes the buffers waiting to be dropped, for the caller to drop outside the lock.
  std::vector<std::shared_ptr<RegisteredMemory>> TakeDropped();

  using Idle = IdleRegions<std::shared_ptr<RegisteredMemory>>;

  RegisterMemory register_memory_;
  Idle idle_{kMinIdleBuffers, kMinIdleBytes};
  mutable absl::Mutex mu_;
  std::vector<std::shared_ptr<RegisteredMemory>> to_drop_ ABSL_GUARDED_BY(mu_);
  std::optional<absl::Status> off_ ABSL_GUARDED_BY(mu_);  // why staging is off
};

}  // namespace ringsync::internal
