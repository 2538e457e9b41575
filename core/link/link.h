// Link: the only thing the ring algorithm knows about the network. A rank sends frames
// to its right neighbour (rank + 1) and receives frames from its left one (rank - 1).
// Implementations: MemoryLink (tests, in one process) and the gRPC peer stream
// (daemon/transport/grpc).
//
// Contract:
//   * Frames arrive in the order they were sent (FIFO per link).
//   * The number of frames in flight is bounded: Send blocks while the receiver is
//     behind, which is the ring's back-pressure. No unbounded queue anywhere.
//   * But a frame other than a segment is sent without waiting for the receiver to read
//     it: a relay's rank sends its whole contribution before it receives (RingExchange),
//     so a link holds at least one such frame unread. Only segments, which the ring sends
//     from a thread of their own (send_queue.h), may wait until the receiver reads.
//   * Every blocking call ends by `WaitLimit::deadline` (DeadlineExceeded) or soon after
//     `WaitLimit::cancellation` is cancelled (Cancelled).
//   * A link may also post sends (posts_sends): PostSend queues a frame without waiting
//     for the receiver and reports later, on a thread of the link's, when the payload may
//     be reused. A pipeline then needs no sending thread of its own, which on a loaded
//     machine saves a thread hand-off per frame. Posted frames are bounded by their
//     poster (a collective posts at most its own segments) and hold no copy.
// Thread-safety: one thread may Send (or PostSend) while another Receives.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "core/collective.h"
#include "core/link/payload.h"
#include "core/sync/wait_limit.h"

namespace ringsync {

enum class FrameKind : uint8_t {
  kSegment = 1,  // a piece of a chunk
  kAbort = 2,    // a rank gave up on the collective; forwarded once around the ring
  kAgree = 4,    // a rank's spec, passed around the ring before any data (RingExchange::Agree)
  kCommit = 5,   // "rank `chunk` completed its data", passed around after it (RingExchange::Commit)
  kRelay = 6,    // rank `chunk`'s spec and whole contribution together (RingExchange::AgreeCarrying)
  kGather = 7,   // as kRelay, on a stride link of the doubling all-reduce (stride_allreduce.h)
  kDirect = 8,   // as kGather, in the direct exchange (stride_allreduce.h)
};

// An abort frame's reason is cut to this many bytes by its sender, and by its receiver
// before anyone reads it: it ends up in error messages and log lines.
inline constexpr size_t kMaxAbortReasonBytes = 1024;

// Link::min_useful_segment_bytes of a link whose frames cost little beside their bytes
// (memory, a shared-memory slot ring, a data connection).
inline constexpr size_t kDefaultMinSegmentBytes = size_t{128} << 10;

struct Frame {
  FrameKind kind = FrameKind::kSegment;
  int sender_rank = 0;
  uint64_t generation = 0;
  uint64_t sequence = 0;    // the collective's sequence number
  uint32_t step = 0;        // global ring step
  uint32_t segment = 0;     // index within the step
  uint32_t chunk = 0;       // kAgree, kCommit: the rank the frame speaks for
  uint64_t offset = 0;      // first element
  uint64_t count = 0;       // elements in the payload
  std::optional<CollectiveSpec> spec;  // on the first frame of each collective
  int abort_origin = -1;    // kAbort: the rank that gave up
  std::string abort_reason; // kAbort: its status message, at most kMaxAbortReasonBytes
  // kAbort: the origin gave up before its data phase completed, so it never sent a commit
  // frame and no rank can return OK: a rank in its commit pass fails plainly, not in
  // doubt. False (the safe side) when the origin had completed, or cannot tell.
  bool abort_before_commit = false;
  // kAgree: Link::min_useful_segment_bytes of the link out of rank `chunk`.
  uint64_t min_segment_bytes = 0;
};

// A posted send's outcome: OK once the frame is on its way and its payload may be
// reused; otherwise why it was not sent, and its payload is not read any more either.
// It may run on any thread, before PostSend returns, or while the link holds its own
// locks: it must not call back into the link.
using SendDone = absl::AnyInvocable<void(absl::Status)>;

struct ReceivedFrame {
  Frame frame;
  Payload payload;  // valid while `storage` lives; possibly in pieces (payload.h)
  std::shared_ptr<const void> storage;
};

class Link {
 public:
  virtual ~Link() = default;

  // Queues `frame` with `payload` for the next rank. Returns once `payload` may be
  // reused by the caller.
  virtual absl::Status Send(const Frame& frame, absl::Span<const std::byte> payload,
                            const WaitLimit& limit) = 0;

  // Whether PostSend may be used: only a link that can queue a frame without waiting for
  // its receiver says yes (it may change when a broken link reconnects).
  virtual bool posts_sends() const { return false; }
  // Queues `frame` with `payload` for the next rank and returns without waiting for the
  // receiver: `done` runs exactly once, later (see SendDone). Frames go out in the order
  // they were sent or posted. `limit` bounds what PostSend itself may wait for (e.g.
  // reconnecting a broken stream), not the frame's journey. REQUIRES: posts_sends().
  virtual void PostSend(const Frame& frame, absl::Span<const std::byte> payload,
                        const WaitLimit& limit, SendDone done) {
    (void)frame, (void)payload, (void)limit;
    done(absl::UnimplementedError("this link does not post sends"));
  }
  // Gives up the posted sends still out (their receiver stopped reading): each `done`
  // runs soon with an error, after which the link reads none of their payloads. The
  // link may have to reconnect before its next frame.
  virtual void AbandonPostedSends() {}

  // The next frame from the previous rank.
  virtual absl::StatusOr<ReceivedFrame> Receive(const WaitLimit& limit) = 0;

  // The header of the frame Receive would return next, without taking it.
  virtual absl::StatusOr<Frame> Peek(const WaitLimit& limit) = 0;

  // The newest collective an abort frame has arrived for (0: none), even if that frame
  // still waits behind others: a rank that never started that collective learns from
  // it that the ring gave the collective up.
  virtual uint64_t newest_aborted_sequence() const = 0;
  // Frames that arrived and wait for Receive: how far this rank is behind its left
  // neighbour (a gauge in the worker's metrics).
  virtual size_t queued_frames() const = 0;
  // How payload travels to the next rank, for metrics ("grpc", "shm", ...); "" when the
  // link does not say.
  virtual absl::string_view transport() const { return ""; }
  // The smallest segment worth a frame of its own on this link, for a collective free to
  // cut its data finer (a chain's: ring_broadcast.h): below it the frame's fixed cost
  // outweighs the overlap that cutting buys. It may change as transport() does. A ring
  // takes the largest of its links' (RingExchange::min_segment_bytes).
  virtual size_t min_useful_segment_bytes() const { return kDefaultMinSegmentBytes; }

  // The newest collective this rank has finished on this link, by success or failure.
  // Frames of finished collectives may still arrive (leftovers of an aborted one, or a
  // late abort of one this rank completed) and are skipped; a frame of any other
  // earlier collective means the left neighbour is behind, which is an error.
  uint64_t finished_sequence() const { return finished_sequence_.load(); }
  void MarkFinished(uint64_t sequence) {
    uint64_t seen = finished_sequence_.load();
    while (sequence > seen && !finished_sequence_.compare_exchange_weak(seen, sequence)) {
    }
  }

 private:
  std::atomic<uint64_t> finished_sequence_{0};
};

}  // namespace ringsync
