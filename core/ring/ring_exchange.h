// RingExchange: one rank's side of one collective on a Link. It runs the agreement on
// the collective before any data moves, stamps outgoing frames, and checks every
// incoming one before the algorithm touches its payload: generation, sequence, sender,
// step, segment, chunk, range and byte length must be exactly what this rank's own
// schedule expects.
//
//   Agreement. Before a byte of data moves, every rank's CollectiveSpec travels the
//   ring once (Agree: N-1 steps of small frames, an all-gather of the specs). Each rank
//   compares every other rank's spec with its own; as all ranks see the same N specs,
//   they all decide alike — every rank goes on, or every rank fails quoting a mismatch,
//   with no caller's buffer touched. Its cost is N-1 hops of one small frame.
//
//   Commit. Once this rank's data phase completed (it holds its complete result), a
//   second small pass travels the ring: N-1 steps of one kCommit frame, an all-gather of
//   "rank r completed its data". A rank returns OK only after it heard every rank's
//   commit, i.e. when every rank holds the complete result; until then the result is
//   not the caller's. Its cost is N-1 more hops of one small frame.
//
//   Why OK on one rank and a plain failure on another cannot happen: a rank returns OK
//   only after hearing every rank's commit, and a rank sends its commit only after its
//   own data completed. A rank that fails after its data completed reports the failure
//   marked OutcomeMark::kInDoubt (it cannot know whether the ring broke before or after
//   some rank heard the last commit: the two generals' problem, the one case no
//   protocol closes). A rank fails plainly only if it failed before its own data
//   completed — then it sent no commit and no rank can return OK — or if the abort that
//   reached it in its commit pass came from a rank that gave up before its data completed
//   (Frame::abort_before_commit), which proves the same. So when any rank returns OK,
//   every other rank returns OK or fails in doubt; a plain failure anywhere means no
//   rank returned OK.
//
// It also carries the abort protocol:
//
//   A rank that gives up sends an abort frame to its right neighbour; each rank that
//   receives one forwards it once and fails with the originator's reason; the frame
//   stops when it returns to its origin. So a failure seen by one rank reaches every
//   rank within one trip around the ring, instead of each waiting for its deadline.
//
// Frames of collectives this rank already finished on the link are dropped (see
// Link::finished_sequence); the destructor marks this collective finished.
//
// Thread-safety: Send*/Post* from one thread while Receive* runs on another. Cancel() from
// any thread.
#pragma once

#include <atomic>
#include <optional>
#include <string>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "core/collective.h"
#include "core/link/link.h"
#include "core/ring/abort_notice.h"
#include "core/ring/partition.h"
#include "core/ring/ring_member.h"

namespace ringsync {

class RingExchange {
 public:
  RingExchange(const RingMember& me, Link& link, const CollectiveSpec& spec,
               const RingOptions& options);
  ~RingExchange() { link_.MarkFinished(spec_.sequence); }
  RingExchange(const RingExchange&) = delete;
  RingExchange& operator=(const RingExchange&) = delete;

  // Waits inside this collective end at its deadline, on Cancel(), or when the
  // caller's RingOptions::cancellation is cancelled.
  const WaitLimit& limit() const { return limit_; }
  const RingMember& member() const { return me_; }
  void Cancel(const absl::Status& why) { cancellation_.Cancel(why); }

  // The agreement above. OK when every rank's spec equals this rank's; otherwise
  // FailedPrecondition quoting a mismatch, on every rank. Any other failure (a lost
  // neighbour, the deadline) is told to the ring like a failure of the data phase. The
  // returned status is annotated. Call it before touching the caller's buffer.
  absl::Status Agree();
  // Agree, for a collective that moves nothing before it: a failure also exports the
  // counters into `stats` (if not null) and says the buffer is untouched.
  absl::Status AgreeBeforeTouching(RingStats* stats);
  // The largest Link::min_useful_segment_bytes of the ring's links, as the agreement
  // frames carried them: the same on every rank once Agree returned OK (before, and on a
  // ring of one, this rank's link's).
  size_t min_segment_bytes() const { return min_segment_bytes_; }

  // Agree, with every rank's `contribution` travelling beside its spec (kRelay frames):
  // at step s this rank forwards the contribution it received at step s-1 (its own at
  // step 0). `on_contribution(origin, frame)` sees each other rank's contribution (the
  // frame's payload, valid while the frame lives) once its spec is known to match this
  // rank's; a spec that does not match is reported like Agree's, on every rank, after
  // the pass. The byte counts go to the stats.
  absl::Status AgreeCarrying(
      absl::Span<const std::byte> contribution,
      absl::FunctionRef<absl::Status(int origin, ReceivedFrame frame)> on_contribution);

  // The commit above. Call it when this rank's data phase completed, and hand the result
  // back only if it returns OK. A failure tells the ring (as NotifyAbort) and comes back
  // annotated, marked OutcomeMark::kInDoubt and naming the ranks whose completion this
  // rank did not hear — unless the ring's abort proves no rank can have returned OK
  // (then it is a plain failure).
  absl::Status Commit();

  // `status`, or for a Cancelled caused by the caller's cancellation, its reason.
  absl::Status ExplainCancel(absl::Status status) const;

  // Sends the segment `range` of `chunk` at `step`.
  absl::Status SendSegment(int step, int segment, int chunk, const ElementRange& range,
                           absl::Span<const std::byte> payload);
  // As SendSegment, posted (Link::PostSend): `done` gets the outcome, an error saying
  // which segment failed. REQUIRES: posts_sends(); this exchange outlives `done`.
  void PostSegment(int step, int segment, int chunk, const ElementRange& range,
                   absl::Span<const std::byte> payload, SendDone done);
  bool posts_sends() const { return link_.posts_sends(); }
  // Link::AbandonPostedSends.
  void AbandonPostedSends() { link_.AbandonPostedSends(); }

  // Receives the next frame of this collective and checks it is exactly the expected
  // segment. An abort frame from another rank returns Aborted with its reason; the frame
  // is forwarded by the NotifyAbort call that follows.
  absl::StatusOr<ReceivedFrame> ReceiveSegment(int step, int segment, int chunk,
                                               const ElementRange& expected);

  // For a rank that received everything while its sender still works: Aborted if an
  // abort frame of this collective is waiting (or arrives within `wait`); otherwise OK.
  absl::Status WatchForAbort(absl::Duration wait);

  // Best effort, after a failure: forwards the abort frame this rank received, or, when
  // the failure began here, sends this rank's own. Never sends a frame back to its origin.
  // REQUIRES: no other thread is sending on the link (join the sender first).
  void NotifyAbort(const absl::Status& cause);

  // For a collective this rank cannot even start (bad arguments): tells the ring, so
  // no peer waits for frames that will never come, and returns the annotated status.
  absl::Status Reject(const absl::Status& why);

  // Prefixes a status with where it happened: "rank 1 (generation 3, collective #17
  // 'grad/fc1'): ...".
  absl::Status Annotate(const absl::Status& status) const;

  // Copies the byte and frame counts into `out` (if not null).
  void ExportStats(RingStats* out) const {
    if (out == nullptr) return;
    out->bytes_sent = stats_.bytes_sent;
    out->bytes_received = stats_.bytes_received;
    out->frames_sent = stats_.frames_sent;
  }

 private:
  // The next frame of this collective (skipping leftovers of finished ones), checked for
  // generation and sequence; an abort frame becomes Aborted. `what` names the awaited
  // frame in errors ("step 2 segment 0"); it is called only when there is an error to
  // name, since this runs for every frame received.
  absl::StatusOr<ReceivedFrame> ReceiveOwn(absl::FunctionRef<std::string()> what);
  // Whether an abort of this collective has arrived from the previous rank (it may still
  // wait behind other frames): the ring gave the collective up.
  bool AbortArrived() const { return link_.newest_aborted_sequence() == spec_.sequence; }
  absl::Status CheckFrame(const Frame& frame, FrameKind kind) const;
  Frame SegmentFrame(int step, int segment, int chunk, const ElementRange& range) const;
  // `failed`, saying which segment did not go out to whom.
  absl::Status SendingSegment(int step, int segment, const absl::Status& failed) const;
  // An agreement frame of the other all-reduce algorithm (relay vs ring) whose spec
  // differs from this rank's: ranks that disagree on an all-reduce's size may choose
  // different algorithms, so this is their disagreement, not a flag mismatch.
  bool IsDisagreeingAgreement(const Frame& f, FrameKind own) const;
  // One pass of small frames of outgoing.kind around the ring, an all-gather of one frame
  // per rank (Agree, Commit): at step s this rank sends what it received at step s-1 (its
  // own at step 0) and receives rank (rank - 1 - s)'s, which `on_frame` checks. `pass`
  // names it in errors ("agreement", "commit").
  absl::Status RelayAround(Frame outgoing, absl::string_view pass,
                           absl::FunctionRef<absl::Status(const Frame&)> on_frame);
  // RelayAround with a payload: `payload` goes out at step 0, and at step s the payload
  // received at step s-1; `on_frame` takes each received frame (and may keep it).
  absl::Status RelayAroundCarrying(Frame outgoing, absl::string_view pass,
                                   absl::Span<const std::byte> payload,
                                   absl::FunctionRef<absl::Status(ReceivedFrame)> on_frame);
  // Agree's checks of one received spec; records the first mismatch in `mismatch`.
  absl::Status CheckSpecOf(const Frame& frame, std::optional<absl::Status>& mismatch) const;
  // The end of an agreement pass (Agree, AgreeCarrying) that returned `result`.
  absl::Status FinishAgreement(absl::Status result, const std::optional<absl::Status>& mismatch);
  absl::Status CheckSegment(const ReceivedFrame& received, int step, int segment, int chunk,
                            const ElementRange& expected);
  absl::Status TakeAbortFrame(const Frame& frame);

  const RingMember me_;
  Link& link_;
  const CollectiveSpec spec_;
  const RingOptions options_;
  const size_t element_size_;
  Cancellation cancellation_;
  WaitLimit limit_;
  uint64_t frames_received_ = 0;  // receive side only
  // Taken by the receiving thread, read by NotifyAbort after the sender is joined.
  AbortNotice abort_;
  bool data_completed_ = false;       // Commit() was called: this rank's data phase is done
  size_t min_segment_bytes_;          // see min_segment_bytes()
  RingStats stats_;          // bytes fields: each touched by one side only
};

}  // namespace ringsync
