// StrideRank: one rank's side of one collective over stride links (stride_links.h):
// the gather pass that brings every rank's spec and contribution to every rank, the
// commit barrier after it, their frames' checks, and the abort protocol over every
// connected link. The stride all-reduce (stride_allreduce.h) combines what the gather
// brought; the small broadcasts, scatters and gathers (stride_copying.h) copy from it.
// Two schedules, kDoubling and kDirect: stride_allreduce.h describes both and the
// protocol.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "core/collective.h"
#include "core/link/link.h"
#include "core/link/stride_links.h"
#include "core/ring/abort_notice.h"
#include "core/ring/rank_messages.h"
#include "core/ring/ring_member.h"
#include "core/ring/schedule.h"
#include "core/sync/cancellation.h"
#include "core/sync/wait_limit.h"

namespace ringsync {

enum class StrideSchedule : uint8_t { kDoubling, kDirect };

// One link's part of a round: its stride, and how many contributions each rank sends on
// it — those of ranks rank, rank-1, ..., rank-carried+1, all held when the round begins.
struct StrideLane {
  int stride;
  int carried;
};

// The rounds of each pass (the commit's lanes carry one commit frame each).
std::vector<std::vector<StrideLane>> StrideRoundsOf(StrideSchedule schedule, int n);

// "direct" or "doubling".
absl::string_view StrideScheduleName(StrideSchedule schedule);

// One rank's contribution as this rank holds it: its spec and its bytes.
struct StrideContribution {
  CollectiveSpec spec;
  std::vector<std::byte> bytes;
};

// What this rank moves straight to and from one other rank in a direct transfer
// (direct_transfer.h): `send` goes to that rank, and what that rank sends lands in
// `receive`. Either may be empty; where both begin at the same place (an all-to-all in
// place) a segment lands only once the one it replaces has gone.
struct DirectRoute {
  absl::Span<const std::byte> send;
  absl::Span<std::byte> receive;
};

class SendProgress;  // stride_rank.cc

// Thread-safety: one thread (the collective's) uses a StrideRank.
class StrideRank {
 public:
  StrideRank(StrideSchedule schedule, const RingMember& me, StrideLinks& links,
             const CollectiveSpec& spec, const RingOptions& options)
      : schedule_(schedule),
        rounds_(StrideRoundsOf(schedule, me.world_size)),
        me_(me),
        links_(links),
        spec_(spec),
        options_(options),
        cancellation_(options.cancellation),
        abort_(me, spec_) {
    limit_.deadline = SteadyDeadline(options.timeout);
    limit_.cancellation = &cancellation_;
  }
  ~StrideRank() {
    for (Link* link : links_.Connected()) link->MarkFinished(spec_.sequence);
  }
  StrideRank(const StrideRank&) = delete;
  StrideRank& operator=(const StrideRank&) = delete;

  // The gather pass: fills `held` (by rank) with every rank's spec and contribution, this
  // rank's `mine`. FailedPrecondition quoting the first rank whose spec differs from this
  // rank's (every rank finds one then); InvalidArgument, told to the others, when a rank's
  // contribution is not `contribution_bytes(rank)` long; Cancelled, told too, when the
  // collective was cancelled by the time the pass completed (the caller writes nothing
  // then); any other failure is told too.
  absl::Status Gather(std::vector<std::byte> mine, std::vector<StrideContribution>& held,
                      absl::FunctionRef<uint64_t(int rank)> contribution_bytes);
  // A direct transfer's data pass, between Gather (which agreed the specs) and Commit:
  // `routes` by rank (this rank's own is ignored). Each route's `send` goes to its rank
  // over the link of that stride as segment frames of up to `segment_bytes` (step 1, the
  // segment's index, this rank as chunk, the segment's byte offset in the route as
  // offset), sent in order from a thread of the pass's own per destination. The frames
  // from each rank are received in rounds (segment 0 from every rank, then segment 1, ...),
  // checked (place and size) and copied into its route's `receive` — in a route that
  // receives where it sends (in place), each only once the same segment of its `send`
  // has gone. A rank with nothing (more) to receive watches every link for an abort
  // notice while its sends go out.
  // Links not connected yet are connected. A failure is told to the others and annotated;
  // the `receive` spans may then hold part of the data.
  absl::Status Transfer(absl::Span<const DirectRoute> routes, size_t segment_bytes);
  // The commit pass (stride_allreduce.h): OK once every rank completed its data.
  absl::Status Commit();
  // For a failure that began here: tells the others, returns the annotated status.
  absl::Status Reject(const absl::Status& why) {
    NotifyAbort(why);
    return Annotate(why);
  }
  void ExportStats(RingStats& out) const {
    out.bytes_sent = stats_.bytes_sent;
    out.bytes_received = stats_.bytes_received;
    out.frames_sent = stats_.frames_sent;
  }

 private:
  absl::Status ExplainCancel(absl::Status status) const {
    return ringsync::ExplainCancel(std::move(status), options_.cancellation);
  }
  int To(int stride) const { return RingMod(me_.rank + stride, me_.world_size); }
  int From(int stride) const { return RingMod(me_.rank - stride, me_.world_size); }
  // The links of a round's lanes, connected if they are not yet.
  absl::StatusOr<std::vector<Link*>> LinksOf(const std::vector<StrideLane>& lanes);
  // One of Transfer's sending threads: `data` to rank To(stride) over `link` as segments,
  // each passed in `progress` once it has gone. On a failure, cancels the pass (which
  // wakes the receiving thread and the other senders) and returns why. Changes no member
  // but the cancellation (and reads none the receiving thread changes).
  absl::Status SendRoute(absl::Span<const std::byte> data, Link& link, int stride,
                         size_t segment_bytes, SendProgress& progress, RingStats& sent);
  // What a failure names a round's frames by: "step k" (doubling), or none (the direct
  // exchange has one round); then a commit round's.
  std::string RoundFrames(int round, absl::string_view whose) const;
  std::string CommitFrames(int round) const;
  absl::Status Send(Link& link, absl::string_view what, int stride, const Frame& frame,
                    absl::Span<const std::byte> payload);
  // The next frame of this collective from rank From(stride) on `link` (leftovers of
  // finished collectives skipped), checked for generation, sequence, sender, kind and
  // place (round, segment, chunk); an abort frame becomes Aborted. `what` names the
  // awaited frame in errors.
  absl::StatusOr<ReceivedFrame> Receive(Link& link, int stride, FrameKind kind, int round,
                                        int segment, int chunk,
                                        absl::FunctionRef<std::string()> what);
  absl::Status CheckFrame(const Frame& f, int from, FrameKind kind, int round, int segment,
                          int chunk) const;
  // Aborted when an abort notice of this collective waits on a link other than
  // `waiting_on`, or arrives there by `until`.
  absl::Status WatchOtherLinks(const Link* waiting_on, SteadyDeadline until);
  // After this rank's own deadline: an abort notice of this collective that arrives on
  // any link within abort_notice_timeout (Aborted), else OK. A rank that was making
  // progress is more likely stuck behind the rank that caused the stall than the cause,
  // and the notice names that rank.
  absl::Status AwaitLateNotice(Link& link);
  absl::Status TakeAbortFrame(const Frame& frame);
  // Best effort, after a failure: forwards the notice this rank received, or sends its own,
  // on every link of its schedule (connected first where it is not yet: this rank's next
  // collective may use it, and the notice must precede that one's frames) and every other
  // connected link.
  void NotifyAbort(const absl::Status& cause);
  // A failed pass: told to the others and annotated.
  absl::Status Failed(absl::Status result) {
    result = ExplainCancel(std::move(result));
    NotifyAbort(result);
    return Annotate(result);
  }
  absl::Status Annotate(const absl::Status& status) const {
    return AnnotateRankFailure(status, me_, spec_, StrideScheduleName(schedule_));
  }

  const StrideSchedule schedule_;
  const std::vector<std::vector<StrideLane>> rounds_;
  const RingMember me_;
  StrideLinks& links_;
  const CollectiveSpec spec_;
  const RingOptions options_;
  Cancellation cancellation_;
  WaitLimit limit_;
  AbortNotice abort_;
  bool data_completed_ = false;            // Commit() was called
  uint64_t frames_received_ = 0;
  RingStats stats_;
};

// For a collective this rank gives up before it runs (its client refused it, say): an
// abort notice on every link, the ring link first, so that a rank that waits on any of
// them (a stride algorithm's rank waits on each) learns why before this rank's next
// collective reaches it there. `strides_in_use`, the strides the stride algorithms run
// on at this ring size, are connected first where they are not yet (within the abort
// notice's timeout): a later collective of this rank may use them. Returns `why`
// annotated, as RingExchange::Reject does.
absl::Status RejectOnEveryLink(const RingMember& me, StrideLinks& links,
                               absl::Span<const int> strides_in_use, const CollectiveSpec& spec,
                               const RingOptions& options, const absl::Status& why);

}  // namespace ringsync
