// Who a rank is in a formed ring, and the knobs every ring collective shares.
#pragma once

#include <cstddef>
#include <cstdint>

#include "absl/time/time.h"
#include "core/sync/cancellation.h"

namespace ringsync {

class InputArrival;  // input_arrival.h

struct RingMember {
  int rank = 0;
  int world_size = 1;
  uint64_t generation = 0;

  int next() const { return (rank + 1) % world_size; }
  int prev() const { return (rank + world_size - 1) % world_size; }
};

struct RingOptions {
  // Bytes per segment. Chunks travel as segments so that receiving, reducing and
  // sending overlap; 1-4 MiB measured best over gRPC on our machines, and tests turn it
  // down to force the multi-segment paths.
  size_t segment_bytes = size_t{1} << 20;
  // The whole collective must finish within this; every wait inside uses it.
  absl::Duration timeout = absl::Seconds(60);
  // How long a rank that gives up waits to tell its neighbour.
  absl::Duration abort_notice_timeout = absl::Seconds(2);
  // Optional: cancelling it aborts the collective on every rank with its reason.
  const Cancellation* cancellation = nullptr;
  // Optional: the buffer's input may still be arriving (input_arrival.h). RingAllReduce
  // waits for each range before it reads it; the other collectives ignore it (their
  // callers wait for the whole input first).
  const InputArrival* input_arrival = nullptr;
};

// What one rank did during a collective, for tests and metrics.
struct RingStats {
  uint64_t bytes_sent = 0;
  uint64_t bytes_received = 0;
  uint64_t frames_sent = 0;
  uint64_t overflows = 0;         // see ReduceStats
  absl::Duration reduce_time;     // time spent combining
  // Time spent waiting for input that was still arriving (RingOptions::input_arrival).
  absl::Duration input_wait;
  // Set by a failed collective that never wrote into its buffer (e.g. the ranks did not
  // agree); false means the buffer may hold partial results.
  bool buffer_untouched = false;
};

}  // namespace ringsync
