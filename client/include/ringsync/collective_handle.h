// CollectiveHandle: a collective started with one of Client's *Async calls.
//
//   ringsync::CollectiveHandle h =
//       client->AllReduceAsync("grad/fc1", absl::MakeSpan(grad), ringsync::ReduceOp::kAvg);
//   ... compute something that does not touch `grad` ...
//   absl::Status s = h.Wait();   // `grad` holds the result iff s.ok()
//
// The caller's buffers (and, for AllGather, its input) must stay alive and untouched
// until the collective has completed: until Wait() returns its status, or Ready()
// returns true. The SDK reads the input when the call starts and writes the result back
// just before completion; on failure the buffer is left as it was.
//
// Destroying (or assigning over) a handle whose collective is still running blocks until
// it completes, like std::future from std::async: the SDK never writes into a buffer
// after its handle is gone.
//
// Thread-safety: Ready() and Wait() may be called concurrently from any threads. Moving,
// assigning or destroying a handle needs exclusive access to it.
#pragma once

#include <memory>
#include <utility>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace ringsync {

namespace internal {
class PendingCollective;
}  // namespace internal

class CollectiveHandle {
 public:
  // An empty handle: valid() is false, Ready() true, Wait() FailedPrecondition.
  CollectiveHandle() = default;
  ~CollectiveHandle();
  CollectiveHandle(CollectiveHandle&& other) noexcept = default;
  CollectiveHandle& operator=(CollectiveHandle&& other) noexcept;
  CollectiveHandle(const CollectiveHandle&) = delete;
  CollectiveHandle& operator=(const CollectiveHandle&) = delete;

  // False for a default-constructed or moved-from handle.
  bool valid() const { return pending_ != nullptr; }

  // True once the collective has completed (successfully or not); never blocks.
  bool Ready() const;

  // Blocks until the collective completes and returns its status (the same status on
  // every call). OK means the result is in the caller's buffer.
  absl::Status Wait();

  // Like Wait(), but gives up after `timeout`: then returns DeadlineExceeded saying the
  // collective is still in flight, and the collective continues (call Wait() again; the
  // buffer is still the SDK's). Tell the two DeadlineExceeded cases apart with Ready().
  absl::Status Wait(absl::Duration timeout);

 private:
  friend class internal::PendingCollective;
  explicit CollectiveHandle(std::shared_ptr<internal::PendingCollective> pending)
      : pending_(std::move(pending)) {}

  std::shared_ptr<internal::PendingCollective> pending_;
};

}  // namespace ringsync
