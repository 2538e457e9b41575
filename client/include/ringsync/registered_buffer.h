// RegisteredBuffer: memory the SDK allocates where the worker can reach it, so that a
// collective on it moves no tensor bytes between the training process and its worker.
//
//   absl::StatusOr<ringsync::RegisteredBuffer> buffer = client->Allocate<float>(n);
//   absl::Span<float> grad = buffer->span<float>();   // fill it as any array
//   absl::Status s = client->AllReduce("grad/fc1", grad, ringsync::ReduceOp::kSum);
//
// An AllReduce or Broadcast whose span lies inside a registered buffer (the whole buffer
// or any part of it) is reduced in place by the worker: no copy in, no copy out. An
// AllGather whose output lies inside one gathers there: the SDK copies the input into
// the output's first slot (the input may be any span, also the rank's own slot of the
// output), nothing is copied out. A ReduceScatter whose input lies inside one and whose
// output is this rank's block of that input (NCCL's in-place form: output = input + rank
// x output count) runs there: the block ends with the result, the input's other blocks
// with partial sums (the ring's scratch; a small one's, run as a whole all-reduce over
// the stride links, with the all-reduce's). Every other span keeps the copy semantics of
// client.h (untouched on failure), a registered ReduceScatter input with its output
// elsewhere too.
//
// After a FAILED collective a registered buffer's contents are unspecified: each element
// holds its input, a partial reduction or the result, and ranks may differ. The status
// says when it is known to be untouched: RegisteredBufferUntouched(status) is true when the
// collective failed before the worker wrote a byte into the buffer (a refused or invalid
// call, no ring, a membership change before it ran) and neither did the SDK (an
// AllGather's input copied into its output's first slot). Otherwise restore the buffer (e.g.
// from the optimizer's state, or redo the backward pass) before relying on it; an
// elastic loop resynchronises anyway (elastic_state.h).
//
// Rules: do not read or write a buffer's span while a collective on it runs (until Wait
// returns or Ready is true); two collectives in flight must not overlap in one buffer.
// The memory is an anonymous, sealed memfd (it cannot be resized, and nothing is left
// on disk or in /dev/shm when either process dies). Registration needs the worker's
// unix socket, with the worker able to see the training process (same pid namespace and
// user); the worker bounds how many buffers a process holds (--max_registered_buffers)
// and their size (--max_registered_buffer_bytes).
//
// Lifetime: destroying the buffer unregisters it (the worker keeps its mapping until a
// collective that still runs on it ends) and frees the memory. A buffer may outlive its
// Client; it is then plain memory.
//
// Thread-safety: a RegisteredBuffer is a move-only value owned by one thread at a time;
// its memory follows the rules above.
#pragma once

#include <cstddef>
#include <memory>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "ringsync/types.h"

namespace ringsync {

namespace internal {
class RegisteredMemory;
}  // namespace internal

class RegisteredBuffer {
 public:
  RegisteredBuffer() = default;  // holds nothing: data() null, size_bytes() 0
  // For the SDK (Client::Allocate).
  explicit RegisteredBuffer(std::shared_ptr<internal::RegisteredMemory> memory);
  RegisteredBuffer(RegisteredBuffer&&) noexcept = default;
  RegisteredBuffer& operator=(RegisteredBuffer&&) noexcept = default;
  RegisteredBuffer(const RegisteredBuffer&) = delete;
  RegisteredBuffer& operator=(const RegisteredBuffer&) = delete;
  ~RegisteredBuffer();

  void* data() const;
  size_t size_bytes() const;
  // The buffer as elements of T (as many whole ones as fit); zeroed when allocated.
  template <Element T>
  absl::Span<T> span() const {
    return absl::Span<T>(static_cast<T*>(data()), size_bytes() / sizeof(T));
  }

 private:
  std::shared_ptr<internal::RegisteredMemory> memory_;
};

// True when `status` is a failure that left a registered buffer exactly as it was (the
// worker wrote nothing into it); false for OK (the buffer holds the result) and for a
// failure after which its contents are unspecified.
bool RegisteredBufferUntouched(const absl::Status& status);

}  // namespace ringsync
