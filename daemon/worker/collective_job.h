// CollectiveJob: one collective a training process asked for, handed from the RPC that
// received it to the executor that runs it on the ring, and back (on_done).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "core/sync/cancellation.h"
#include "core/sync/steady_deadline.h"
#include "core/sync/steady_stopwatch.h"
#include "core/collective.h"
#include "core/ring/input_arrival.h"
#include "core/ring/ring_member.h"
#include "daemon/worker/registered_buffers.h"
#include "daemon/worker/shared_tensor.h"

namespace ringsync {

struct CollectiveJob {
  // What to run. spec.sequence is assigned by the executor.
  CollectiveSpec spec;
  uint64_t client_sequence = 0;
  // The request's timeout, or the worker's default: from acceptance to the result.
  absl::Duration timeout = absl::InfiniteDuration();
  SteadyDeadline deadline;  // acceptance + timeout
  SteadyStopwatch queued;   // started when the worker accepted the request
  // The ring membership (ring_membership.h) the client issued it for: the request's
  // membership, or the worker's when the request says none. Set by Submit at the latest.
  std::optional<uint64_t> membership;

  // The data: bytes owned here, from the request (inline) or read from the client's
  // shared-memory region when the collective starts (LoadShared; see shared_tensor.h).
  // For an all-gather the input is the first spec.count elements of a buffer that
  // ResultBuffer sizes for the ring (a shared region must be that size already).
  // Not OK: the worker refused the request (RefusedJob); the job only takes its turn,
  // to fail the collective on every rank.
  absl::Status refusal;

  bool is_shared = false;
  std::vector<std::byte> inline_data;
  SharedTensor shared;
  // A tensor in a registered buffer (registered_buffers.h): the ring works in that
  // memory itself; the worker holds no copy. Set when registered.mapping is not null.
  RegisteredBuffers::Slice registered;
  // Set when the client is still copying the registered tensor in (an all-reduce's plain
  // span it staged there): the ring awaits each range before reading it
  // (core/ring/input_arrival.h); any other algorithm awaits all of it first.
  std::shared_ptr<const InputArrival> arrival;
  // A broadcast or scatter whose client left its input out
  // (CollectiveRequest.input_left_out): it must not run with this rank as the root.
  bool input_left_out = false;
  // A gather whose client has no output (CollectiveRequest.output_left_out): it must not
  // run with this rank as the root.
  bool output_left_out = false;
  // Set once the ring may have written into the caller's memory (a registered buffer):
  // a failure after it leaves that memory unspecified, before it untouched.
  bool touched_caller_memory = false;

  // Cancelled by the RPC when the client goes away.
  Cancellation client_gone;

  // Called once, from the executor's thread, when the results are in (before `done`).
  absl::AnyInvocable<void()> on_done;

  // Results, valid once `done` is notified.
  absl::Notification done;
  absl::Status status;
  uint64_t generation = 0;
  uint64_t membership_now = 0;  // the membership it was judged against
  RingStats stats;
  absl::Duration elapsed;

  // Where the result lies in bytes() once the collective ran: all of it, except a
  // reduce-scatter's or a scatter's, the block of the rank it ran as, and a gather's on a
  // rank other than the root, none (set by the executor).
  uint64_t result_offset = 0;
  std::optional<uint64_t> result_bytes;

  bool is_registered() const { return registered.mapping != nullptr; }
  // How the tensor reached this worker, for metrics: "registered", "file", "inline", or
  // "none" (no data).
  absl::string_view data_path() const {
    if (is_registered()) return "registered";
    if (is_shared) return "file";
    return inline_data.empty() ? "none" : "inline";
  }
  absl::Span<std::byte> bytes() {
    return is_registered() ? registered.bytes : absl::MakeSpan(inline_data);
  }
  // The result within an inline job's data (see result_offset).
  absl::Span<const std::byte> Result() const {
    const absl::Span<const std::byte> all = absl::MakeConstSpan(inline_data);
    if (result_offset > all.size()) return {};
    return all.subspan(result_offset, result_bytes.value_or(all.size() - result_offset));
  }
  // What the job holds or will hold while it waits and runs, for the queue's bounds
  // (a registered buffer is the client's memory: none).
  uint64_t data_bytes() const { return is_shared ? shared.size() : inline_data.size(); }
  // Reads the shared region into this job's memory (the collective is about to run),
  // taking that memory from `spare`: a worker that all-reduces tensors of one size again
  // and again has the memory allocated (page-faulted, zero-filled) once, not for every
  // collective — that was a fifth of a 64 MiB all-reduce's CPU time in the worker.
  absl::Status LoadShared(std::vector<std::byte>& spare) {
    inline_data.swap(spare);
    // Too small: let it go before allocating, so the two never coexist (and nothing is
    // copied across) — the worker's peak stays one tensor.
    if (inline_data.capacity() < shared.size()) std::vector<std::byte>().swap(inline_data);
    inline_data.resize(shared.size());
    return shared.ReadInto(absl::MakeSpan(inline_data));
  }
  // Writes the result back into the shared region, and hands the memory back to `spare`
  // (which so holds at most the largest shared tensor this worker ran).
  absl::Status StoreShared(std::vector<std::byte>& spare) {
    absl::Status stored = shared.WriteFrom(inline_data);
    spare.swap(inline_data);
    std::vector<std::byte>().swap(inline_data);
    return stored;
  }
  // What the ring works in on a ring of `world_size`: the data, an inline all-gather's or
  // gather's grown to hold every rank's slot (its input stays first), an inline uneven
  // all-to-all's grown to hold its result after its input. (A reduce-scatter's or a
  // scatter's is its input: the result is a block of it, result_offset.)
  absl::Span<std::byte> ResultBuffer(int world_size) {
    const std::optional<uint64_t> elements = WorkingElements(spec, world_size);
    const bool grows = TraitsOf(spec.kind).gathers || HasUnevenBlocks(spec);
    if (grows && !is_shared && !is_registered() && elements.has_value()) {
      inline_data.resize(*elements * DTypeSize(spec.dtype));
    }
    return bytes();
  }
  void Finish(const absl::Status& result) {
    status = result;
    if (on_done) on_done();
    done.Notify();
  }
};

}  // namespace ringsync
