#include "core/ring/stride_rank.h"

#include <algorithm>
#include <limits>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/outcome.h"

namespace ringsync {
namespace {

FrameKind GatherKind(StrideSchedule schedule) {
  return schedule == StrideSchedule::kDirect ? FrameKind::kDirect : FrameKind::kGather;
}

// How often a rank waiting on one link looks at its others for an abort notice: a
// notice takes another path than the frame awaited, so this bounds how late it is seen.
constexpr absl::Duration kAbortWatchInterval = absl::Milliseconds(20);

// The step a direct transfer's segment frames carry: after the gather pass's round 0.
constexpr int kTransferStep = 1;

// An abort notice on every link, those of `strides` connected first where they are not
// yet: a later collective of this rank may use them, and the notice must precede its
// frames there. Best effort, each step within `timeout`: a peer may be gone.
void SendOnEveryLink(StrideLinks& links, absl::Span<const int> strides, const Frame& notice,
                     absl::Duration timeout) {
  for (int stride : strides) {
    if (stride > 1) links.Stride(stride, WaitLimit{SteadyDeadline(timeout)}).IgnoreError();
  }
  for (Link* link : links.Connected()) {
    // A fresh limit: the collective's own may be cancelled or spent already.
    link->Send(notice, {}, WaitLimit{SteadyDeadline(timeout)}).IgnoreError();
  }
}

}  // namespace

// How far a direct transfer's sending threads have got, one per destination: how many
// segments to rank+d have gone (or been given up). A receive that lands where a send
// still reads waits for it here.
class SendProgress {
 public:
  // Nothing goes to any rank until Expect says so.
  explicit SendProgress(int n) : passed_(static_cast<size_t>(n), kAll) {}
  // A sending thread will send to rank+d.
  void Expect(int d) {
    absl::MutexLock lock(&mu_);
    passed_[static_cast<size_t>(d)] = 0;
  }
  // Segment `segment` to rank+d has gone.
  void Passed(int d, size_t segment) {
    absl::MutexLock lock(&mu_);
    size_t& passed = passed_[static_cast<size_t>(d)];
    passed = std::max(passed, segment + 1);
  }
  // Nothing more will read what goes to rank+d: every segment went, or was given up.
  void PassedAll(int d) {
    absl::MutexLock lock(&mu_);
    passed_[static_cast<size_t>(d)] = kAll;
  }
  // True once segment `segment` to rank+d passed; false when `wait` ran out first.
  bool AwaitPassed(int d, size_t segment, absl::Duration wait) {
    absl::MutexLock lock(&mu_);
    auto passed = [&]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
      return passed_[static_cast<size_t>(d)] > segment;
    };
    return mu_.AwaitWithTimeout(absl::Condition(&passed), wait);
  }
  // True once every sending thread is done; false when `wait` ran out first.
  bool AwaitAllPassed(absl::Duration wait) {
    absl::MutexLock lock(&mu_);
    auto all = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
      return std::all_of(passed_.begin(), passed_.end(), [](size_t p) { return p == kAll; });
    };
    return mu_.AwaitWithTimeout(absl::Condition(&all), wait);
  }

 private:
  static constexpr size_t kAll = std::numeric_limits<size_t>::max();
  absl::Mutex mu_;
  std::vector<size_t> passed_ ABSL_GUARDED_BY(mu_);  // by d
};

std::vector<std::vector<StrideLane>> StrideRoundsOf(StrideSchedule schedule, int n) {
  std::vector<std::vector<StrideLane>> rounds;
  if (n < 2) return rounds;
  switch (schedule) {
    case StrideSchedule::kDoubling:
      for (int stride = 1; stride < n; stride *= 2) {
        rounds.push_back({StrideLane{stride, std::min(stride, n - stride)}});
      }
      break;
    case StrideSchedule::kDirect:
      rounds.emplace_back();
      for (int stride = 1; stride < n; ++stride) rounds.back().push_back(StrideLane{stride, 1});
      break;
  }
  return rounds;
}

absl::string_view StrideScheduleName(StrideSchedule schedule) {
  return schedule == StrideSchedule::kDirect ? "direct" : "doubling";
}

absl::StatusOr<std::vector<Link*>> StrideRank::LinksOf(const std::vector<StrideLane>& lanes) {
  std::vector<Link*> links;
  for (const StrideLane& lane : lanes) {
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

absl::Status StrideRank::Gather(std::vector<std::byte> mine, std::vector<StrideContribution>& held,
                                absl::FunctionRef<uint64_t(int rank)> contribution_bytes) {
  const int n = me_.world_size;
  const FrameKind kind = GatherKind(schedule_);
  held.assign(static_cast<size_t>(n), StrideContribution{});
  std::vector<bool> here(static_cast<size_t>(n), false);
  here[me_.rank] = true;
  held[me_.rank] = StrideContribution{spec_, std::move(mine)};
  absl::Status result = absl::OkStatus();
  for (int round = 0; round < static_cast<int>(rounds_.size()) && result.ok(); ++round) {
    const std::vector<StrideLane>& lanes = rounds_[round];
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
      const StrideLane& l = lanes[lane];
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
              StrideScheduleName(schedule_), " frame from rank ", from, " for rank ", origin,
              " arrived without a spec"));
          break;
        }
        stats_.bytes_received += received->payload.size();
        held[origin] = StrideContribution{*received->frame.spec, received->payload.ToVector()};
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
    if (held[origin].bytes.size() != contribution_bytes(origin)) {
      return Failed(absl::InvalidArgumentError(absl::StrCat(
          "rank ", origin, "'s contribution carries ", held[origin].bytes.size(), " bytes; ",
          contribution_bytes(origin), " belong there for ", spec_.count, " x ",
          DTypeName(spec_.dtype))));
    }
  }
  if (limit_.IsCancelled()) {
    // Cancelled (the client left) while small frames flowed without a blocking wait:
    // give up now, before this rank's data completes, so every rank fails plainly.
    return Reject(ExplainCancel(absl::CancelledError("cancelled")));
  }
  return absl::OkStatus();
}

absl::Status StrideRank::Transfer(absl::Span<const DirectRoute> routes, size_t segment_bytes) {
  const int n = me_.world_size;
  segment_bytes = std::max<size_t>(segment_bytes, 1);
  auto segments = [segment_bytes](size_t bytes) {
    return (bytes + segment_bytes - 1) / segment_bytes;
  };
  size_t rounds = 0;
  // By stride: the link to rank+s, which also brings rank-s's frames; connected only
  // where a route uses it.
  std::vector<Link*> links(static_cast<size_t>(n), nullptr);
  for (int stride = 1; stride < n; ++stride) {
    const size_t out = segments(routes[static_cast<size_t>(To(stride))].send.size());
    const size_t in = segments(routes[static_cast<size_t>(From(stride))].receive.size());
    if (out == 0 && in == 0) continue;
    rounds = std::max({rounds, out, in});
    absl::StatusOr<std::vector<Link*>> link = LinksOf({StrideLane{stride, 1}});
    if (!link.ok()) return Failed(link.status());
    links[static_cast<size_t>(stride)] = link->front();
  }

  // A sending thread per destination, each sending its segments in order, and this
  // thread receiving in rounds: segment i from rank+1, rank+2, ..., then segment i+1. No
  // two ranks wait on each other: a receive from rank Z waits only for Z's sender to this
  // rank, which never waits for anything but this rank's taking its earlier segments; and
  // a receive that waits for this rank's own segment i to Y to have gone waits for a
  // sender blocked only while Y has its segment i-1 unread, so Y waits in an earlier
  // round — the rounds fall until a wait ends (in round 0 no sender waits: a link queues
  // a frame). A slow destination holds up only its own sender, as Gloo's and MPI's
  // posted sends do; one thread feeding every link in turn left the others idle
  // whenever one socket was full.
  std::vector<RingStats> sent(static_cast<size_t>(n));
  std::vector<absl::Status> send_results(static_cast<size_t>(n));
  SendProgress progress(n);
  std::vector<std::thread> senders;
  for (int stride = 1; stride < n; ++stride) {
    const absl::Span<const std::byte> data = routes[static_cast<size_t>(To(stride))].send;
    if (data.empty()) continue;
    progress.Expect(stride);
    senders.emplace_back([&, stride, data] {
      const auto s = static_cast<size_t>(stride);
      send_results[s] = SendRoute(data, *links[s], stride, segment_bytes, progress, sent[s]);
      progress.PassedAll(stride);  // gone or given up: nothing reads `data` any more
    });
  }
  absl::Status result = absl::OkStatus();
  for (size_t i = 0; i < rounds && result.ok(); ++i) {
    for (int d = 1; d < n && result.ok(); ++d) {
      const int from = To(d);
      const int stride = n - d;  // the link that brings rank+d's frames
      const DirectRoute& route = routes[static_cast<size_t>(from)];
      const absl::Span<std::byte> into = route.receive;
      const size_t at = i * segment_bytes;
      if (at >= into.size()) continue;
      const size_t bytes = std::min(segment_bytes, into.size() - at);
      // Where this segment lands, the one this rank sends there may still be read (an
      // all-to-all in place): it waits until that one has gone.
      const bool in_place = route.receive.data() == route.send.data();
      while (in_place && at < route.send.size() && result.ok() &&
             !progress.AwaitPassed(d, i, kAbortWatchInterval)) {
        result = limit_.IsCancelled() ? absl::CancelledError("a sending thread failed")
                                      : WatchOtherLinks(nullptr, limit_.deadline);
      }
      if (!result.ok()) break;
      absl::StatusOr<ReceivedFrame> received =
          Receive(*links[static_cast<size_t>(stride)], stride, FrameKind::kSegment,
                  kTransferStep, static_cast<int>(i), from,
                  [&] { return absl::StrCat("segment ", i, " of rank ", from, "'s data"); });
      if (!received.ok()) {
        result = received.status();
      } else if (received->frame.offset != at || received->payload.size() != bytes) {
        result = absl::InvalidArgumentError(absl::StrCat(
            "segment ", i, " of rank ", from, "'s data carries ", received->payload.size(),
            " bytes at byte ", received->frame.offset, "; ", bytes, " at byte ", at,
            " belong there"));
      } else {
        received->payload.CopyTo(into.subspan(at, bytes));
        stats_.bytes_received += bytes;
      }
    }
  }
  while (result.ok() && !progress.AwaitAllPassed(kAbortWatchInterval)) {
    result = WatchOtherLinks(nullptr, limit_.deadline);
  }
  if (!result.ok()) cancellation_.Cancel(result);  // the senders give up their sends
  for (std::thread& sender : senders) sender.join();
  for (int stride = 1; stride < n; ++stride) {
    const auto s = static_cast<size_t>(stride);
    stats_.bytes_sent += sent[s].bytes_sent;
    stats_.frames_sent += sent[s].frames_sent;
    // A sender's failure cancelled the receiving; its cause is the one to report.
    if (!send_results[s].ok() && (result.ok() || absl::IsCancelled(result))) {
      result = send_results[s];
    }
  }
  if (!result.ok()) return Failed(std::move(result));
  return absl::OkStatus();
}

absl::Status StrideRank::SendRoute(absl::Span<const std::byte> data, Link& link, int stride,
                                   size_t segment_bytes, SendProgress& progress,
                                   RingStats& sent) {
  const int to = To(stride);
  for (size_t i = 0, at = 0; at < data.size(); ++i, at += segment_bytes) {
    const absl::Span<const std::byte> piece = data.subspan(at, segment_bytes);
    Frame frame = StampedFrame(FrameKind::kSegment, me_, spec_.sequence, kTransferStep,
                               static_cast<int>(i), me_.rank);
    frame.offset = at;
    frame.count = piece.size();
    if (absl::Status s = link.Send(frame, piece, limit_); !s.ok()) {
      const absl::Status failed(s.code(), absl::StrCat("sending segment ", i,
                                                       " of this rank's data to rank ", to, ": ",
                                                       s.message()));
      cancellation_.Cancel(failed);
      return failed;
    }
    sent.bytes_sent += piece.size();
    ++sent.frames_sent;
    progress.Passed(stride, i);  // its payload is the caller's again
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
    const std::vector<StrideLane>& lanes = rounds_[round];
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
        "out-of-schedule ", StrideScheduleName(schedule_), " frame from rank ", from, ": got step ",
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
  std::vector<int> strides;
  for (const std::vector<StrideLane>& round : rounds_) {
    for (const StrideLane& lane : round) strides.push_back(lane.stride);
  }
  SendOnEveryLink(links_, strides, *notice, options_.abort_notice_timeout);
}

absl::Status RejectOnEveryLink(const RingMember& me, StrideLinks& links,
                               absl::Span<const int> strides_in_use, const CollectiveSpec& spec,
                               const RingOptions& options, const absl::Status& why) {
  AbortNotice abort(me, spec);
  const std::optional<Frame> notice = abort.ToSend(why, /*data_completed=*/false);
  if (notice.has_value() && me.world_size >= 2 && me.rank >= 0 && me.rank < me.world_size) {
    SendOnEveryLink(links, strides_in_use, *notice, options.abort_notice_timeout);
  }
  // Over for this rank: what the others still send of it is a leftover on every link.
  for (Link* link : links.Connected()) link->MarkFinished(spec.sequence);
  return AnnotateRankFailure(why, me, spec);
}

}  // namespace ringsync
