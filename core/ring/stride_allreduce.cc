#include "core/ring/stride_allreduce.h"

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/strings/str_cat.h"
#include "core/outcome.h"
#include "core/ring/abort_notice.h"
#include "core/ring/rank_messages.h"
#include "core/ring/ring_allreduce.h"
#include "core/ring/ring_order_combine.h"
#include "core/ring/schedule.h"

namespace ringsync {

namespace {

// One link's part of a round: its stride, and how many contributions each rank sends on
// it — those of ranks rank, rank-1, ..., rank-carried+1, all held when the round begins.
struct Lane {
  int stride;
  int carried;
};

// The rounds of each pass (the commit's lanes carry one commit frame each).
std::vector<std::vector<Lane>> RoundsOf(StrideSchedule schedule, int n) {
  std::vector<std::vector<Lane>> rounds;
  if (n < 2) return rounds;
  switch (schedule) {
    case StrideSchedule::kDoubling:
      for (int stride = 1; stride < n; stride *= 2) {
        rounds.push_back({Lane{stride, std::min(stride, n - stride)}});
      }
      break;
    case StrideSchedule::kDirect:
      rounds.emplace_back();
      for (int stride = 1; stride < n; ++stride) rounds.back().push_back(Lane{stride, 1});
      break;
  }
  return rounds;
}

FrameKind GatherKind(StrideSchedule schedule) {
  return schedule == StrideSchedule::kDirect ? FrameKind::kDirect : FrameKind::kGather;
}

absl::string_view ScheduleName(StrideSchedule schedule) {
  return schedule == StrideSchedule::kDirect ? "direct" : "doubling";
}

// How often a rank waiting on one link looks at its others for an abort notice: a
// notice takes another path than the frame awaited, so this bounds how late it is seen.
constexpr absl::Duration kAbortWatchInterval = absl::Milliseconds(20);

// One rank's contribution as this rank holds it: its spec and its pre-scaled bytes.
struct Contribution {
  CollectiveSpec spec;
  std::vector<std::byte> bytes;
};

// One rank's side of one stride all-reduce: the passes of its schedule, their frames'
// checks, and the abort protocol over every connected link.
class StrideRank {
 public:
  StrideRank(StrideSchedule schedule, const RingMember& me, StrideLinks& links,
             const CollectiveSpec& spec, const RingOptions& options)
      : schedule_(schedule),
        rounds_(RoundsOf(schedule, me.world_size)),
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

  const WaitLimit& limit() const { return limit_; }

  // The gather pass: fills `held` (by rank) with every rank's spec and contribution.
  // FailedPrecondition quoting the first rank whose spec differs from this rank's (every
  // rank finds one then); any other failure is told to the others.
  absl::Status Gather(std::vector<std::byte> mine, std::vector<Contribution>& held);
  // The commit pass; see the header.
  absl::Status Commit();
  // For a failure that began here: tells the others, returns the annotated status.
  absl::Status Reject(const absl::Status& why) {
    NotifyAbort(why);
    return Annotate(why);
  }
  absl::Status ExplainCancel(absl::Status status) const {
    return ringsync::ExplainCancel(std::move(status), options_.cancellation);
  }
  void ExportStats(RingStats& out) const {
    out.bytes_sent = stats_.bytes_sent;
    out.bytes_received = stats_.bytes_received;
    out.frames_sent = stats_.frames_sent;
  }

 private:
  int To(int stride) const { return RingMod(me_.rank + stride, me_.world_size); }
  int From(int stride) const { return RingMod(me_.rank - stride, me_.world_size); }
  // The links of a round's lanes, connected if they are not yet.
  absl::StatusOr<std::vector<Link*>> LinksOf(const std::vector<Lane>& lanes);
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
  // on every connected link.
  void NotifyAbort(const absl::Status& cause);
  // A failed pass: told to the others and annotated.
  absl::Status Failed(absl::Status result) {
    result = ExplainCancel(std::move(result));
    NotifyAbort(result);
    return Annotate(result);
  }
  absl::Status Annotate(const absl::Status& status) const {
    return AnnotateRankFailure(status, me_, spec_, ScheduleName(schedule_));
  }

  const StrideSchedule schedule_;
  const std::vector<std::vector<Lane>> rounds_;
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

absl::StatusOr<std::vector<Link*>> StrideRank::LinksOf(const std::vector<Lane>& lanes) {
  std::vector<Link*> links;
  for (const Lane& lane : lanes) {
    absl::StatusOr<Link*> link = links_.Stride(lane.stride, limit_);
    if (!link.ok()) {
      return absl::Status(link.status().code(),
                          absl::StrCat("connecting the link of stride ", lane.stride, " to rank ",
                                       To(lane.stride), ": ", link.status().message()));
    }
    links.push_back(*link);
  }
  return links;
}

std::string StrideRank::RoundFrames(int round, absl::string_view whose) const {
  if (schedule_ == StrideSchedule::kDirect) return std::string(whose);
  return absl::StrCat("step ", round, " (", whose, ")");
}

std::string StrideRank::CommitFrames(int round) const {
  return schedule_ == StrideSchedule::kDirect ? "the commit" : absl::StrCat("commit step ", round);
}

absl::Status StrideRank::Send(Link& link, absl::string_view what, int stride, const Frame& frame,
                              absl::Span<const std::byte> payload) {
  if (absl::Status s = link.Send(frame, payload, limit_); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat("sending ", what, " to rank ", To(stride), ": ",
                                                s.message()));
  }
  ++stats_.frames_sent;
  stats_.bytes_sent += payload.size();
  return absl::OkStatus();
}

absl::Status StrideRank::Gather(std::vector<std::byte> mine, std::vector<Contribution>& held) {
  const int n = me_.world_size;
  const size_t element_size = DTypeSize(spec_.dtype);
  const FrameKind kind = GatherKind(schedule_);
  held.assign(static_cast<size_t>(n), Contribution{});
  std::vector<bool> here(static_cast<size_t>(n), false);
  here[me_.rank] = true;
  held[me_.rank] = Contribution{spec_, std::move(mine)};
  absl::Status result = absl::OkStatus();
  for (int round = 0; round < static_cast<int>(rounds_.size()) && result.ok(); ++round) {
    const std::vector<Lane>& lanes = rounds_[round];
    absl::StatusOr<std::vector<Link*>> links = LinksOf(lanes);
    if (!links.ok()) {
      result = links.status();
      break;
    }
    std::vector<int> sent(lanes.size(), 0);
    auto send_next = [&](size_t lane) {
      const int origin = RingMod(me_.rank - sent[lane], n);
      Frame frame = StampedFrame(kind, me_, spec_.sequence, round, sent[lane], origin);
      frame.spec = held[origin].spec;
      frame.count = held[origin].spec.count;
      ++sent[lane];
      return Send(*(*links)[lane],
                  RoundFrames(round, absl::StrCat("rank ", origin, "'s contribution")),
                  lanes[lane].stride, frame, held[origin].bytes);
    };
    // Every lane's first frames go out before any receive: the links queue them.
    for (size_t lane = 0; lane < lanes.size() && result.ok(); ++lane) {
      const int first = std::min(lanes[lane].carried, kStrideLinkQueuedFrames);
      while (sent[lane] < first && result.ok()) result = send_next(lane);
    }
    for (size_t lane = 0; lane < lanes.size() && result.ok(); ++lane) {
      const Lane& l = lanes[lane];
      const int from = From(l.stride);
      for (int i = 0; i < l.carried && result.ok(); ++i) {
        const int origin = RingMod(from - i, n);
        absl::StatusOr<ReceivedFrame> received =
            Receive(*(*links)[lane], l.stride, kind, round, i, origin, [&] {
              return RoundFrames(round, absl::StrCat("rank ", origin, "'s contribution"));
            });
        if (!received.ok()) {
          result = received.status();
          break;
        }
        if (!received->frame.spec.has_value()) {
          result = absl::InvalidArgumentError(absl::StrCat(
              ScheduleName(schedule_), " frame from rank ", from, " for rank ", origin,
              " arrived without a spec"));
          break;
        }
        stats_.bytes_received += received->payload.size();
        held[origin] = Contribution{*received->frame.spec, received->payload.ToVector()};
        here[origin] = true;
        // One more out for each one in: no rank ever has more frames on its way than its
        // receiver's link queues unread, so no two ranks wait on each other's sends.
        if (sent[lane] < l.carried) result = send_next(lane);
      }
    }
  }
  if (!result.ok()) {
    // Name every rank whose contribution did not arrive, not only the one waited on: the
    // rank it waited on may itself be waiting for the cause.
    std::string lacking;
    for (int back = 1; back < n; ++back) {
      const int rank = RingMod(me_.rank - back, n);
      if (!here[rank]) {
        absl::StrAppend(&lacking, lacking.empty() ? "" : ", ", rank);
      }
    }
    if (!lacking.empty() && !absl::IsAborted(result) && !IsAgreementMismatch(result)) {
      result = absl::Status(result.code(), absl::StrCat(result.message(),
                                                        "; contributions not yet here: rank(s) ",
                                                        lacking));
    }
    return Failed(std::move(result));
  }
  // Every rank holds every spec now, so every rank finds a mismatch if there is one (no
  // notice needed); each quotes the lowest rank that differs from its own.
  for (int origin = 0; origin < n; ++origin) {
    if (origin == me_.rank) continue;
    if (absl::Status s = CheckAgreement(spec_, me_.rank, held[origin].spec, origin); !s.ok()) {
      return Annotate(s);
    }
    if (held[origin].bytes.size() != spec_.count * element_size) {
      return Failed(absl::InvalidArgumentError(absl::StrCat(
          "rank ", origin, "'s contribution carries ", held[origin].bytes.size(), " bytes for ",
          spec_.count, " x ", DTypeName(spec_.dtype))));
    }
  }
  return absl::OkStatus();
}

absl::Status StrideRank::Commit() {
  data_completed_ = true;
  const int n = me_.world_size;
  // By distance back: whether the rank that far back is known to have completed its data.
  // Every rank runs the same rounds, so a commit received on the link of stride s in a
  // round vouches for what its sender knew when the round began, shifted by s.
  std::vector<bool> known(static_cast<size_t>(n), false);
  known[0] = true;
  absl::Status result = absl::OkStatus();
  for (int round = 0; round < static_cast<int>(rounds_.size()) && result.ok(); ++round) {
    const std::vector<Lane>& lanes = rounds_[round];
    absl::StatusOr<std::vector<Link*>> links = LinksOf(lanes);
    if (!links.ok()) {
      result = links.status();
      break;
    }
    for (size_t lane = 0; lane < lanes.size() && result.ok(); ++lane) {
      result = Send(*(*links)[lane], CommitFrames(round), lanes[lane].stride,
                    StampedFrame(FrameKind::kCommit, me_, spec_.sequence, round, 0, me_.rank), {});
    }
    const std::vector<bool> known_at_start = known;
    for (size_t lane = 0; lane < lanes.size() && result.ok(); ++lane) {
      const int stride = lanes[lane].stride;
      absl::StatusOr<ReceivedFrame> received =
          Receive(*(*links)[lane], stride, FrameKind::kCommit, round, 0, From(stride),
                  [this, round] { return CommitFrames(round); });
      if (!received.ok()) {
        result = received.status();
        break;
      }
      for (int back = 0; back + stride < n; ++back) {
        if (known_at_start[back]) known[back + stride] = true;
      }
    }
  }
  if (result.ok()) return absl::OkStatus();
  result = ExplainCancel(std::move(result));
  NotifyAbort(result);  // marked as given up after the data: receivers stay in doubt
  if (abort_.origin_before_commit()) {
    // The rank that gave up never completed its data, so no commit of it went out and no
    // rank can have returned OK: a plain failure, like every rank's.
    return Annotate(result);
  }
  std::string unheard;
  for (int back = 1; back < n; ++back) {
    if (known[back]) continue;
    absl::StrAppend(&unheard, unheard.empty() ? "" : ", ", RingMod(me_.rank - back, n));
  }
  return WithOutcomeMark(Annotate(CommitInDoubt(result, unheard, "")), OutcomeMark::kInDoubt);
}

absl::StatusOr<ReceivedFrame> StrideRank::Receive(Link& link, int stride, FrameKind kind,
                                                  int round, int segment, int chunk,
                                                  absl::FunctionRef<std::string()> what) {
  const int from = From(stride);
  const bool ring_link = stride == 1;
  while (true) {
    WaitLimit slice = limit_;
    slice.deadline = std::min(limit_.deadline, SteadyDeadline(kAbortWatchInterval));
    absl::StatusOr<ReceivedFrame> received = link.Receive(slice);
    if (absl::IsDeadlineExceeded(received.status()) && !limit_.deadline.Passed()) {
      if (absl::Status s = WatchOtherLinks(&link, limit_.deadline); !s.ok()) return s;
      continue;
    }
    if (absl::IsDeadlineExceeded(received.status()) && frames_received_ > 0) {
      if (absl::Status s = AwaitLateNotice(link); !s.ok()) return s;
    }
    if (!received.ok()) {
      const absl::Status& s = received.status();
      return absl::Status(s.code(), absl::StrCat("waiting for ", what(), " from rank ", from, ": ",
                                                 s.message()));
    }
    ++frames_received_;
    const Frame& f = received->frame;
    if (f.generation != me_.generation) {
      return absl::FailedPreconditionError(absl::StrCat(
          "rank ", from, " sent a frame of generation ", f.generation,
          " but this rank is in generation ", me_.generation, "; the ring changed under it"));
    }
    // Left over from a collective this rank finished (or, on a stride link, which only
    // these algorithms use, one it skipped): not this collective's.
    if (f.sequence < spec_.sequence && (!ring_link || f.sequence <= link.finished_sequence())) {
      continue;
    }
    if (f.kind == FrameKind::kAbort && f.sequence == spec_.sequence) return TakeAbortFrame(f);
    if (absl::Status s = CheckFrame(f, from, kind, round, segment, chunk); !s.ok()) return s;
    return received;
  }
}

absl::Status StrideRank::CheckFrame(const Frame& f, int from, FrameKind kind, int round,
                                    int segment, int chunk) const {
  if (f.sequence != spec_.sequence) {
    return absl::FailedPreconditionError(absl::StrCat(
        "ranks called different collectives: rank ", from, " is at collective #", f.sequence,
        " while this rank is at ", DescribeCollective(spec_),
        "; every rank must issue the same collectives in the same order"));
  }
  if (f.kind != kind && IsAgreementKind(f.kind) && IsAgreementKind(kind)) {
    return DifferentAlgorithmsError(spec_, me_, f, from, kind);
  }
  if (f.kind != kind) {
    return absl::InvalidArgumentError(absl::StrCat(FrameKindName(f.kind), " from rank ", from,
                                                   " where ", FrameKindName(kind),
                                                   " belongs (a frame was lost or misplaced)"));
  }
  if (f.sender_rank != from) {
    return absl::InvalidArgumentError(absl::StrCat("frame claims to come from rank ", f.sender_rank,
                                                   ", but this link leads to rank ", from));
  }
  if (f.step != static_cast<uint32_t>(round) || f.segment != static_cast<uint32_t>(segment) ||
      f.chunk != static_cast<uint32_t>(chunk)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "out-of-schedule ", ScheduleName(schedule_), " frame from rank ", from, ": got step ",
        f.step, " frame ", f.segment, " for rank ", f.chunk, ", expected step ", round, " frame ",
        segment, " for rank ", chunk));
  }
  return absl::OkStatus();
}

absl::Status StrideRank::AwaitLateNotice(Link& link) {
  const SteadyDeadline until(options_.abort_notice_timeout);
  while (!until.Passed()) {
    WaitLimit slice;
    slice.deadline = std::min(until, SteadyDeadline(kAbortWatchInterval));
    absl::StatusOr<ReceivedFrame> late = link.Receive(slice);
    if (late.ok() && late->frame.kind == FrameKind::kAbort &&
        late->frame.sequence == spec_.sequence) {
      return TakeAbortFrame(late->frame);
    }
    if (!late.ok() && !absl::IsDeadlineExceeded(late.status())) break;  // the link is gone
    if (absl::Status s = WatchOtherLinks(&link, until); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status StrideRank::WatchOtherLinks(const Link* waiting_on, SteadyDeadline until) {
  for (Link* link : links_.Connected()) {
    if (link == waiting_on || link->newest_aborted_sequence() != spec_.sequence) continue;
    // The notice may wait behind frames of this collective: this rank fails anyway, so
    // take them.
    WaitLimit take;
    take.deadline = std::min(until, SteadyDeadline(options_.abort_notice_timeout));
    while (true) {
      absl::StatusOr<ReceivedFrame> next = link->Receive(take);
      if (!next.ok()) break;
      if (next->frame.kind == FrameKind::kAbort && next->frame.sequence == spec_.sequence) {
        return TakeAbortFrame(next->frame);
      }
    }
  }
  return absl::OkStatus();
}

absl::Status StrideRank::TakeAbortFrame(const Frame& frame) { return abort_.Take(frame); }

void StrideRank::NotifyAbort(const absl::Status& cause) {
  const std::optional<Frame> notice = abort_.ToSend(cause, data_completed_);
  if (!notice.has_value()) return;
  for (Link* link : links_.Connected()) {
    // A fresh limit: the collective's own may be cancelled or spent already.
    WaitLimit limit;
    limit.deadline = SteadyDeadline(options_.abort_notice_timeout);
    link->Send(*notice, {}, limit).IgnoreError();  // best effort: the peer may be gone
  }
}

}  // namespace

std::optional<StrideSchedule> StrideScheduleOf(AllReduceAlgorithm algorithm) {
  switch (algorithm) {
    case AllReduceAlgorithm::kDoubling: return StrideSchedule::kDoubling;
    case AllReduceAlgorithm::kDirect: return StrideSchedule::kDirect;
    case AllReduceAlgorithm::kRing:
    case AllReduceAlgorithm::kRelay: break;
  }
  return std::nullopt;
}

int StrideRounds(StrideSchedule schedule, int world_size) {
  return static_cast<int>(RoundsOf(schedule, world_size).size());
}

std::vector<int> StridesBeyondTheRing(StrideSchedule schedule, int world_size) {
  std::vector<int> strides;
  for (const std::vector<Lane>& round : RoundsOf(schedule, world_size)) {
    for (const Lane& lane : round) {
      if (lane.stride > 1) strides.push_back(lane.stride);
    }
  }
  return strides;
}

absl::Status StrideAllReduce(StrideSchedule schedule, const RingMember& me, StrideLinks& links,
                             Reducer& reducer, const CollectiveSpec& spec,
                             absl::Span<std::byte> buffer, const RingOptions& options,
                             RingStats* stats) {
  const ReduceSpec rspec{spec.dtype, spec.op, me.world_size, spec.pre_scale, spec.post_scale};
  StrideRank rank(schedule, me, links, spec, options);
  if (absl::Status s = CheckAllReduceArguments(me, spec, buffer, rspec); !s.ok()) {
    return rank.Reject(s);
  }
  RingStats local;
  std::vector<std::byte> mine(buffer.begin(), buffer.end());
  ReduceStats pre;
  if (absl::Status s = reducer.PreScale(rspec, mine.data(), spec.count, &pre); !s.ok()) {
    return rank.Reject(s);
  }
  local.overflows += pre.overflows;

  std::vector<Contribution> held;
  absl::Status result = rank.Gather(std::move(mine), held);
  if (result.ok() && rank.limit().IsCancelled()) {
    // Cancelled (the client left) while small frames flowed without a blocking wait:
    // give up now, before this rank's data completes, so every rank fails plainly.
    result = rank.Reject(rank.ExplainCancel(absl::CancelledError("cancelled")));
  }
  const bool combining = result.ok();  // the caller's buffer is written from here on
  if (combining) {
    std::vector<absl::Span<const std::byte>> contributions;
    contributions.reserve(held.size());
    for (const Contribution& c : held) contributions.emplace_back(c.bytes);
    result = CombineInRingOrder(me, reducer, rspec, spec.count, DTypeSize(spec.dtype),
                                contributions, buffer, local);
    if (!result.ok()) result = rank.Reject(result);
  }
  if (result.ok()) result = rank.Commit();
  rank.ExportStats(local);
  local.buffer_untouched = !result.ok() && !combining;
  if (stats != nullptr) *stats = local;
  return result;
}

}  // namespace ringsync
