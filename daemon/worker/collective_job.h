// CollectiveJob: one collective a training process asked for, handed from the RPC
// thread that received it to the executor that runs it on the ring, and back.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "core/sync/cancellation.h"
#include "core/collective.h"
#include "core/ring/ring_member.h"
#include "daemon/worker/shared_tensor.h"

namespace ringsync {

struct CollectiveJob {
  // What to run. spec.sequence is assigned by the executor.
  CollectiveSpec spec;
  uint64_t client_sequence = 0;
  absl::Time deadline;

  // The data: either bytes owned here (inline) or the client's shared-memory region.
  // For an all-gather the input is the first spec.count elements; the executor grows
  // an inline buffer to world_size x count and requires a shared region of that size.
  bool is_shared = false;
  std::vector<std::byte> inline_data;
  SharedTensor shared;

  // Cancelled by the RPC thread when the client goes away.
  Cancellation client_gone;

  // Results, valid once `done` is notified.
  absl::Notification done;
  absl::Status status;
  uint64_t generation = 0;
  RingStats stats;
  absl::Duration elapsed;

  absl::Span<std::byte> bytes() {
    return is_shared ? shared.bytes() : absl::MakeSpan(inline_data);
  }
  void Finish(const absl::Status& result) {
    status = result;
    done.Notify();
  }
};

}  // namespace ringsync
