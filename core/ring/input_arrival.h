// InputArrival: a collective whose input is still arriving in its buffer when it starts.
//
// Why: a training process's plain span is copied into memory the worker shares with it
// before the worker can reduce it, and at 64 MiB that copy takes as long as a ring step.
// The SDK sends the request first and copies the tensor in the order the ring reads it
// (AllReduceInputOrder, schedule.h), marking each piece as it lands; the ring waits for a
// range only when it is about to read it, so the copy and the first steps overlap.
//
// Contract: once AwaitBytes returns OK for a range, those bytes hold the caller's input
// and nothing but the collective writes them any more (the ring may then overwrite them
// with results). A range the ring never awaited must not be read or written by it.
// RingAllReduce awaits each range before it first reads it; the other collectives are
// given a buffer whose input has arrived (the caller awaits all of it first).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "core/sync/steady_stopwatch.h"
#include "core/sync/wait_limit.h"

namespace ringsync {

class InputArrival {
 public:
  virtual ~InputArrival() = default;

  // Returns OK once bytes [offset, offset + size) of the buffer have arrived (at once for
  // size 0); DeadlineExceeded or Cancelled when `limit` ends first, saying how much of the
  // input is missing. Thread-safe.
  virtual absl::Status AwaitBytes(size_t offset, size_t size, const WaitLimit& limit) const = 0;
};

// Adds up how long the awaits on another InputArrival took (RingStats::input_wait): the
// time a collective stood waiting for its caller's input. Thread-safe.
class TimedInputArrival final : public InputArrival {
 public:
  explicit TimedInputArrival(const InputArrival& inner) : inner_(inner) {}

  absl::Status AwaitBytes(size_t offset, size_t size, const WaitLimit& limit) const override {
    const SteadyStopwatch awaiting;
    absl::Status arrived = inner_.AwaitBytes(offset, size, limit);
    waited_nanos_.fetch_add(absl::ToInt64Nanoseconds(awaiting.Elapsed()), std::memory_order_relaxed);
    return arrived;
  }
  absl::Duration waited() const { return absl::Nanoseconds(waited_nanos_.load(std::memory_order_relaxed)); }

 private:
  const InputArrival& inner_;
  mutable std::atomic<int64_t> waited_nanos_{0};
};

}  // namespace ringsync
