#include "daemon/worker/collective_executor.h"

#include "absl/strings/str_cat.h"
#include "core/outcome.h"
#include "core/ring/ring_allgather.h"
#include "core/ring/ring_allreduce.h"
#include "core/ring/ring_broadcast.h"
#include "core/ring/ring_exchange.h"
#include "core/ring/ring_gather.h"
#include "core/ring/ring_scatter.h"
#include "core/ring/stride_allreduce.h"
#include "core/ring/direct_transfer.h"
#include "core/ring/stride_copying.h"
#include "core/ring/relay_allreduce.h"
#include "daemon/logging/string_view_formatter.h"
#include "daemon/worker/epoch_stride_links.h"
#include "spdlog/spdlog.h"

namespace ringsync {
namespace {

// How long the idle executor waits for a job before checking for a stop.
constexpr absl::Duration kIdlePoll = absl::Milliseconds(20);

}  // namespace

CollectiveExecutor::CollectiveExecutor(std::string worker_id, EpochSource& ring, Reducer& reducer,
                                       ExecutorOptions options, WorkerMetrics* metrics)
    : worker_id_(std::move(worker_id)),
      ring_(ring),
      reducer_(reducer),
      options_(options),
      metrics_(metrics),
      thread_([this](std::stop_token stop) { Loop(stop); }) {}

CollectiveExecutor::~CollectiveExecutor() {
  thread_.request_stop();
  thread_.join();
  absl::MutexLock lock(&mu_);
  for (auto& [sequence, job] : queued_) {
    job->Finish(absl::UnavailableError("the worker is shutting down"));
  }
  queued_.clear();
  queued_bytes_ = 0;
}

absl::Status CollectiveExecutor::CheckRoom(uint64_t bytes) const {
  absl::MutexLock lock(&mu_);
  return CheckRoomLocked(bytes);
}

absl::Status CollectiveExecutor::CheckRoomLocked(uint64_t bytes) const {
  if (queued_.size() >= options_.max_queued_jobs) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "worker ", worker_id_, " has ", queued_.size(),
        " collectives of its client queued already (--max_queued_jobs=",
        options_.max_queued_jobs, "); wait for some to finish before issuing more"));
  }
  if (bytes > options_.max_queued_bytes - std::min(queued_bytes_, options_.max_queued_bytes)) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "worker ", worker_id_, " holds ", queued_bytes_, " bytes of its client's queued "
        "collectives; ", bytes, " more would pass --max_queued_bytes=", options_.max_queued_bytes,
        "; wait for some to finish before issuing more"));
  }
  return absl::OkStatus();
}

absl::Status CollectiveExecutor::Submit(std::shared_ptr<CollectiveJob> job) {
  return Accept(std::move(job), /*run_here_if_idle=*/false);
}

absl::Status CollectiveExecutor::SubmitAndRunIfIdle(std::shared_ptr<CollectiveJob> job) {
  return Accept(std::move(job), /*run_here_if_idle=*/true);
}

absl::Status CollectiveExecutor::Accept(std::shared_ptr<CollectiveJob> job, bool run_here_if_idle) {
  if (!job->membership.has_value()) job->membership = ring_.Membership().id;
  absl::Status refused;
  {
    absl::MutexLock lock(&mu_);
    if (!attached_) {
      refused = absl::FailedPreconditionError(
          "this client is not attached to the worker (its Attach stream ended); reconnect");
    } else if (job->client_sequence < next_client_sequence_ ||
               queued_.count(job->client_sequence) != 0) {
      refused = absl::InvalidArgumentError(absl::StrCat(
          "client_sequence ", job->client_sequence,
          " was used already; number collectives 1, 2, 3, ... per attached client"));
    } else {
      refused = CheckRoomLocked(job->data_bytes());
    }
    if (refused.ok()) {
      if (!run_here_if_idle || turn_taken_ || job->client_sequence != next_client_sequence_) {
        queued_bytes_ += job->data_bytes();
        queued_[job->client_sequence] = std::move(job);
        return absl::OkStatus();
      }
      // Never queued, so the executor's thread is not woken for it.
      turn_taken_ = true;
      ++next_client_sequence_;
    }
  }
  if (!refused.ok()) {
    job->Finish(refused);
    return refused;
  }
  Run(*job);
  ReleaseTurn();
  return absl::OkStatus();
}

bool CollectiveExecutor::Attach() {
  std::shared_ptr<RingEpoch> epoch = ring_.Ready();
  absl::MutexLock lock(&mu_);
  if (attached_) return false;
  attached_ = true;
  detached_.reset();
  clean_detach_ = false;
  next_client_sequence_ = 1;
  aborted_before_attach_ = epoch != nullptr ? epoch->link->newest_aborted_sequence() : 0;
  return true;
}

uint64_t CollectiveExecutor::SkipThrough() const {
  absl::MutexLock lock(&mu_);
  return attached_ ? aborted_before_attach_ : std::numeric_limits<uint64_t>::max();
}

void CollectiveExecutor::Detach(const absl::Status& why) {
  std::map<uint64_t, std::shared_ptr<CollectiveJob>> dropped;
  {
    absl::MutexLock lock(&mu_);
    attached_ = false;
    if (!clean_detach_) detached_.emplace();
    clean_detach_ = false;
    dropped.swap(queued_);
    queued_bytes_ = 0;
  }
  for (auto& [sequence, job] : dropped) job->Finish(why);
}

void CollectiveExecutor::ExpectCleanDetach() {
  absl::MutexLock lock(&mu_);
  if (attached_) clean_detach_ = true;
}

ExecutorCounters CollectiveExecutor::counters() const {
  absl::MutexLock lock(&mu_);
  return counters_;
}

void CollectiveExecutor::Record(const CollectiveSpec& spec, const RingEpoch* epoch,
                                const RingStats& stats, absl::Duration elapsed,
                                const absl::Status& status, absl::string_view data_path) {
  const FailureCause cause = status.ok() ? FailureCause::kOther : ClassifyFailure(status);
  {
    absl::MutexLock lock(&mu_);
    if (status.ok()) {
      ++counters_.completed;
    } else {
      ++counters_.failed;
      counters_.last_error = std::string(status.message());
    }
  }
  if (metrics_ != nullptr) {
    FinishedCollective finished;
    finished.kind = spec.kind;
    finished.dtype = spec.dtype;
    finished.bytes = spec.count * (IsValid(spec.dtype) ? DTypeSize(spec.dtype) : 0);
    finished.epoch = epoch;
    finished.stats = stats;
    finished.elapsed = elapsed;
    finished.status = status;
    finished.cause = cause;
    finished.data_path = data_path;
    if (epoch != nullptr) finished.algorithm = AlgorithmNameOf(spec, *epoch);
    metrics_->OnCollectiveFinished(finished);
  }
  if (!status.ok()) {
    spdlog::warn("collective failed (cause {}): {}", FailureCauseName(cause), status.message());
  }
}

void CollectiveExecutor::Loop(std::stop_token stop) {
  while (!stop.stop_requested()) {
    std::shared_ptr<CollectiveJob> job;
    if (!AwaitTurn(kIdlePoll, job)) continue;
    if (job != nullptr) {
      Run(*job);
    } else {
      TendIdleRing();
    }
    ReleaseTurn();
  }
}

void CollectiveExecutor::TendIdleRing() {
  std::shared_ptr<RingEpoch> epoch = ring_.Ready();
  if (epoch == nullptr) return;
  std::optional<Frame> waiting = DropLeftovers(*epoch, SkipThrough());
  const std::optional<absl::Duration> gone_for = ClientGoneFor();
  if (waiting.has_value() && gone_for.has_value() && *gone_for >= options_.reattach_grace) {
    FailForAbsentClient(*epoch, *waiting, *gone_for);
  }
}

std::optional<absl::Duration> CollectiveExecutor::ClientGoneFor() const {
  absl::MutexLock lock(&mu_);
  if (attached_ || !detached_.has_value()) return std::nullopt;
  return detached_->Elapsed();
}

void CollectiveExecutor::FailForAbsentClient(RingEpoch& epoch, const Frame& first,
                                             absl::Duration gone_for) {
  CollectiveSpec spec = first.spec.value_or(CollectiveSpec{});
  spec.sequence = first.sequence;
  epoch.next_sequence = first.sequence + 1;
  epoch.newest_run = first.sequence;
  RingOptions options;
  options.timeout = absl::Seconds(1);  // only an abort frame goes out
  options.abort_notice_timeout = options_.abort_notice_timeout;
  const absl::Status failed = RejectBeforeRunning(
      epoch, spec, options,
      absl::FailedPreconditionError(absl::StrCat(
          "worker ", worker_id_, " has no training process attached (its client left ",
          absl::FormatDuration(absl::Trunc(gone_for, absl::Milliseconds(1))),
          " ago); restart that rank's training process")));
  last_ring_ = LastRing{epoch.me, epoch.next_sequence};
  Record(spec, &epoch, RingStats{}, absl::ZeroDuration(), failed);
}

bool CollectiveExecutor::AwaitTurn(absl::Duration wait, std::shared_ptr<CollectiveJob>& job) {
  absl::MutexLock lock(&mu_);
  auto runnable = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
    return !turn_taken_ && queued_.count(next_client_sequence_) != 0;
  };
  mu_.AwaitWithTimeout(absl::Condition(&runnable), wait);
  DropStalledJobs();
  if (turn_taken_) return false;
  turn_taken_ = true;
  job = TakeNextLocked();
  return true;
}

void CollectiveExecutor::ReleaseTurn() {
  absl::MutexLock lock(&mu_);
  turn_taken_ = false;
}

std::shared_ptr<CollectiveJob> CollectiveExecutor::TakeNextLocked() {
  auto it = queued_.find(next_client_sequence_);
  if (it == queued_.end()) return nullptr;
  std::shared_ptr<CollectiveJob> job = std::move(it->second);
  queued_.erase(it);
  queued_bytes_ -= job->data_bytes();
  ++next_client_sequence_;
  return job;
}

void CollectiveExecutor::DropStalledJobs() {
  if (queued_.empty() || queued_.begin()->first == next_client_sequence_) return;
  // Every queued job waits behind next_client_sequence_, which the client has not sent.
  for (auto it = queued_.begin(); it != queued_.end();) {
    CollectiveJob& job = *it->second;
    const absl::Duration waited = job.queued.Elapsed();
    if (!job.deadline.Passed() && waited < options_.sequence_gap_timeout) {
      ++it;
      continue;
    }
    job.Finish(absl::DeadlineExceededError(absl::StrCat(
        "client collective ", it->first, " waited ",
        absl::FormatDuration(absl::Trunc(waited, absl::Milliseconds(1))),
        " for client collective ", next_client_sequence_,
        ", which this client never sent (a queued collective waits at most "
        "--client_sequence_gap_timeout=",
        absl::FormatDuration(options_.sequence_gap_timeout), " for a missing one)")));
    queued_bytes_ -= job.data_bytes();
    it = queued_.erase(it);
  }
}

void CollectiveExecutor::Run(CollectiveJob& job) {
  const SteadyStopwatch running;
  if (absl::Status gone = FailIfMembershipMoved(job); !gone.ok()) {
    job.elapsed = running.Elapsed();
    Record(job.spec, nullptr, job.stats, job.elapsed, gone, job.data_path());
    job.Finish(gone);
    return;
  }
  if (job.refusal.ok() && job.is_shared) {
    // Read now, not when queued: a waiting job holds a descriptor, not the tensor's bytes.
    // And before the ring is looked up, so that the ring it runs on is the current one.
    if (absl::Status loaded = job.LoadShared(shared_staging_); !loaded.ok()) {
      job.refusal = absl::Status(loaded.code(), absl::StrCat("worker ", worker_id_,
                                                             " could not read its client's "
                                                             "tensor: ", loaded.message()));
    }
  }
  absl::StatusOr<std::shared_ptr<RingEpoch>> epoch =
      ring_.AwaitReady(WaitLimit{job.deadline, &job.client_gone});
  absl::Status result;
  if (!epoch.ok()) {
    result = job.refusal.ok() ? NoRing(job, epoch.status()) : job.refusal;
  } else {
    job.generation = (*epoch)->me.generation;
    result = RunOnRing(job, **epoch);
    last_ring_ = LastRing{(*epoch)->me, (*epoch)->next_sequence};
  }
  if (!result.ok()) {
    // It failed because the ring changed under it (a dissolution, a re-form): the loop
    // has to resynchronise rather than retry.
    const MembershipSnapshot now = ring_.Membership();
    job.membership_now = now.id;
    result = MarkIfMembershipChanged(std::move(result), *job.membership, now);
  }
  job.elapsed = running.Elapsed();
  Record(job.spec, epoch.ok() ? epoch->get() : nullptr, job.stats, job.elapsed, result,
         job.data_path());
  if (result.ok()) {
    spdlog::debug("{} ({}, {}) done in {}: sent {} B, received {} B on the ring, {} waiting for "
                  "the input to arrive",
                  DescribeCollective(job.spec), DescribeShape(job.spec),
                  AlgorithmNameOf(job.spec, **epoch), absl::FormatDuration(job.elapsed),
                  job.stats.bytes_sent, job.stats.bytes_received,
                  absl::FormatDuration(job.stats.input_wait));
  }
  job.Finish(result);
}

absl::Status CollectiveExecutor::FailIfMembershipMoved(CollectiveJob& job) const {
  const MembershipSnapshot now = ring_.Membership();
  job.membership_now = now.id;
  if (*job.membership == now.id) return absl::OkStatus();
  // Its data and the client's idea of rank and world size were for the old ring. Every
  // rank's collective issued before the change fails here alike, without a turn on the
  // new ring, so the new ring's first collective is every rank's first one after the
  // change (ElasticState::Sync's).
  // Named as the ring would have numbered it (as NoRing does), so that it reads like the
  // failures of the ranks whose turn on the ring had begun.
  CollectiveSpec would_be = job.spec;
  if (last_ring_.has_value()) would_be.sequence = last_ring_->next_sequence;
  const std::string where =
      last_ring_.has_value()
          ? absl::StrCat("rank ", last_ring_->me.rank, " (generation ", last_ring_->me.generation,
                         ", ", DescribeCollective(would_be), ", client collective ",
                         job.client_sequence, ")")
          : absl::StrCat("collective '", job.spec.name, "' (client collective ",
                         job.client_sequence, ")");
  return MarkIfMembershipChanged(
      absl::AbortedError(absl::StrCat(where, " was issued for the ring before its membership "
                                             "changed and did not run; the caller's buffer is "
                                             "untouched")),
      *job.membership, now);
}

absl::Status CollectiveExecutor::NoRing(const CollectiveJob& job, const absl::Status& why) const {
  if (!last_ring_.has_value()) {
    return absl::Status(why.code(), absl::StrCat("collective '", job.spec.name,
                                                 "' (client collective ", job.client_sequence,
                                                 "): no ring to run on: ", why.message()));
  }
  // Named as the ring would have numbered it, so every rank's error reads alike.
  CollectiveSpec would_be = job.spec;
  would_be.sequence = last_ring_->next_sequence;
  return absl::Status(why.code(),
                      absl::StrCat("rank ", last_ring_->me.rank, " (generation ",
                                   last_ring_->me.generation, ", ", DescribeCollective(would_be),
                                   "): no ring to run on: ", why.message()));
}

absl::Status CollectiveExecutor::RunOnRing(CollectiveJob& job, RingEpoch& epoch) {
  AlignWithRing(epoch);
  job.spec.sequence = epoch.next_sequence++;
  epoch.newest_run = job.spec.sequence;
  Cancellation cancel(&job.client_gone, &epoch.over);
  RingOptions options;
  options.segment_bytes = options_.segment_bytes;
  // The ring gives up early enough that its abort notices (and a rank's wait for the
  // notice naming the cause) still end by the client's deadline: a rank past its deadline
  // helps no one, and its client would be told only that the call timed out.
  const absl::Duration remaining = job.deadline.Left();
  options.timeout = remaining - std::min(options_.abort_notice_timeout, remaining / 4);
  options.cancellation = &cancel;
  options.abort_notice_timeout = std::min(options_.abort_notice_timeout, remaining / 4);
  options.input_arrival = job.arrival.get();  // read by the ring only (RunAlgorithm)
  if (!job.refusal.ok()) {
    // The request was refused: tell the ring, so every rank fails this collective now.
    return RejectBeforeRunning(epoch, job.spec, options, job.refusal);
  }
  // From here the ring may write into a registered buffer (the client's own memory).
  job.touched_caller_memory = job.is_registered();
  absl::Status result = RunAlgorithm(job, epoch, options);
  if (!result.ok() && job.stats.buffer_untouched) job.touched_caller_memory = false;
  if (result.ok() && job.is_shared) {
    // The ring committed (every rank holds the result; the others report OK); only this
    // rank's copy back can still fail (its client truncated the file meanwhile). Marked in
    // doubt, as a failure beside other ranks' OK must be: resynchronise, do not retry.
    if (absl::Status stored = job.StoreShared(shared_staging_); !stored.ok()) {
      result = WithOutcomeMark(
          absl::Status(stored.code(),
                       absl::StrCat("rank ", epoch.me.rank, " (generation ", epoch.me.generation,
                                    ", ", DescribeCollective(job.spec),
                                    "): the ring completed (other ranks report OK), but worker ",
                                    worker_id_, " could not write the result back: ",
                                    stored.message())),
          OutcomeMark::kInDoubt);
    }
  }
  return result;
}

AllReduceAlgorithm CollectiveExecutor::AlgorithmOf(const CollectiveSpec& spec,
                                                  const RingMember& me) const {
  const uint64_t bytes = spec.count * (IsValid(spec.dtype) ? DTypeSize(spec.dtype) : 0);
  return ChooseAllReduceAlgorithm(me.world_size, bytes, spec.dtype, spec.op, options_.algorithm);
}

std::optional<StrideSchedule> CollectiveExecutor::StrideScheduleFor(
    const CollectiveSpec& spec, const RingEpoch& epoch) const {
  // An epoch without stride links (an EpochSource of tests) runs the ring's algorithms.
  if (epoch.strides == nullptr) return std::nullopt;
  switch (spec.kind) {
    case CollectiveKind::kAllReduce:
    case CollectiveKind::kBarrier:
    case CollectiveKind::kReduceScatter:
      return StrideScheduleOf(AlgorithmOf(spec, epoch.me));
    case CollectiveKind::kBroadcast:
    case CollectiveKind::kScatter:
    case CollectiveKind::kGather:
    case CollectiveKind::kAllGather:
    case CollectiveKind::kAllToAll:
      if (auto small = StrideScheduleToCopy(spec, epoch.me.world_size, options_.algorithm)) {
        return small;
      }
      // A large scatter's, gather's or all-to-all's data goes straight to its rank,
      // whatever the schedule of its agreement: as the metric says, the direct exchange;
      // beyond kDirectRanksLimit an all-to-all's hops the doubling's links.
      if (auto passes = DirectTransferSchedule(spec, epoch.me.world_size, options_.algorithm)) {
        return epoch.me.world_size > kDirectRanksLimit ? *passes : StrideSchedule::kDirect;
      }
      return std::nullopt;
  }
  return std::nullopt;
}

absl::string_view CollectiveExecutor::AlgorithmNameOf(const CollectiveSpec& spec,
                                                      const RingEpoch& epoch) const {
  if (const std::optional<StrideSchedule> schedule = StrideScheduleFor(spec, epoch)) {
    return StrideScheduleName(*schedule);
  }
  switch (spec.kind) {
    case CollectiveKind::kAllReduce:
    case CollectiveKind::kBarrier: {
      const AllReduceAlgorithm algorithm = AlgorithmOf(spec, epoch.me);
      // Without stride links a stride algorithm relays (RunAllReduceAlgorithm).
      return AlgorithmName(StrideScheduleOf(algorithm).has_value() ? AllReduceAlgorithm::kRelay
                                                                   : algorithm);
    }
    case CollectiveKind::kBroadcast:
    case CollectiveKind::kScatter:
    case CollectiveKind::kGather:
      return "chain";
    case CollectiveKind::kAllGather:
    case CollectiveKind::kReduceScatter:
      return "ring";
    case CollectiveKind::kAllToAll:
      return "none";  // refused: it runs over stride links only
  }
  return "unknown";
}

absl::Status CollectiveExecutor::RunAlgorithm(CollectiveJob& job, RingEpoch& epoch,
                                              const RingOptions& options) {
  const RingMember& me = epoch.me;
  Link& link = *epoch.link;
  const absl::Span<std::byte> data = job.ResultBuffer(me.world_size);
  switch (job.spec.kind) {
    case CollectiveKind::kAllReduce:
    case CollectiveKind::kBarrier: {  // an all-reduce of nothing
      const AllReduceAlgorithm algorithm = AlgorithmOf(job.spec, me);
      const auto run = [&] { return RunAllReduceAlgorithm(algorithm, job, epoch, data, options); };
      // The ring reads input as it arrives; the others read it whole.
      return algorithm == AllReduceAlgorithm::kRing ? run()
                                                    : OnceArrived(job, epoch, data, options, run);
    }
    case CollectiveKind::kBroadcast:
      if (job.input_left_out && me.rank == job.spec.root) {
        return RejectLeftOutRoot(job, epoch, options);
      }
      return RunCopying(job, epoch, data, options, [&] {
        return RingBroadcast(me, link, job.spec, data, options, &job.stats);
      });
    case CollectiveKind::kScatter:
      if (job.input_left_out && me.rank == job.spec.root) {
        return RejectLeftOutRoot(job, epoch, options);
      }
      PlaceBlockResult(job, me);
      return RunCopying(job, epoch, data, options, [&] {
        return RingScatter(me, link, job.spec, data, options, &job.stats);
      });
    case CollectiveKind::kAllGather:
      return RunCopying(job, epoch, data, options, [&] {
        return RingAllGatherFromFirstSlot(me, link, job.spec, data, options, &job.stats);
      });
    case CollectiveKind::kGather:
      if (job.output_left_out && me.rank == job.spec.root) {
        return RejectLeftOutRoot(job, epoch, options);
      }
      // Only the root has a result; the others' buffers only gave the ring room.
      job.result_bytes = me.rank == job.spec.root ? data.size() : 0;
      return RunCopying(job, epoch, data, options, [&] {
        return RingGatherFromFirstSlot(me, link, job.spec, data, options, &job.stats);
      });
    case CollectiveKind::kAllToAll:
      if (HasUnevenBlocks(job.spec)) PlaceUnevenResult(job, me);
      return RunCopying(job, epoch, data, options, [&] {
        // It has no ring algorithm: its blocks travel over the stride links.
        return RejectBeforeRunning(
            epoch, job.spec, options,
            absl::FailedPreconditionError(
                "an all-to-all runs over the stride links, which this worker's transport "
                "has not got"));
      });
    case CollectiveKind::kReduceScatter: {
      PlaceBlockResult(job, me);
      // A small one runs the whole stride all-reduce, whose block r is bitwise the
      // reduce-scatter's; the ring's leaves partial sums in the rest of the buffer.
      if (const std::optional<StrideSchedule> schedule = StrideScheduleFor(job.spec, epoch)) {
        return OnceArrived(job, epoch, data, options, [&] {
          return StrideAllReduce(*schedule, me, *epoch.strides, reducer_, job.spec, data, options,
                                 &job.stats);
        });
      }
      return RingReduceScatter(me, link, reducer_, job.spec, data, options, &job.stats);
    }
  }
  return absl::InvalidArgumentError("unknown collective kind");
}

absl::Status CollectiveExecutor::OnceArrived(CollectiveJob& job, RingEpoch& epoch,
                                             absl::Span<const std::byte> data,
                                             const RingOptions& options,
                                             absl::FunctionRef<absl::Status()> run) {
  if (job.arrival == nullptr) return run();
  const WaitLimit limit{SteadyDeadline(options.timeout), options.cancellation};
  const TimedInputArrival timed(*job.arrival);
  const absl::Status in = timed.AwaitBytes(0, data.size(), limit);
  const absl::Status result = in.ok() ? run() : RejectBeforeRunning(epoch, job.spec, options, in);
  job.stats.input_wait += timed.waited();  // after the algorithm filled in its stats
  return result;
}

absl::Status CollectiveExecutor::RejectBeforeRunning(RingEpoch& epoch,
                                                     const CollectiveSpec& spec,
                                                     const RingOptions& options,
                                                     const absl::Status& why) const {
  // Where stride algorithms run, a rank may wait on any link for this one: tell them all.
  if (epoch.strides != nullptr) {
    const std::vector<int> strides = StridesToConnectAhead(epoch.me.world_size, options_.algorithm);
    return RejectOnEveryLink(epoch.me, *epoch.strides, strides, spec, options, why);
  }
  return RingExchange(epoch.me, *epoch.link, spec, options).Reject(why);
}

absl::Status CollectiveExecutor::RunCopying(CollectiveJob& job, RingEpoch& epoch,
                                            absl::Span<std::byte> data, const RingOptions& options,
                                            absl::FunctionRef<absl::Status()> on_the_ring) {
  const int n = epoch.me.world_size;
  if (epoch.strides == nullptr) return on_the_ring();  // an EpochSource of tests
  if (auto small = StrideScheduleToCopy(job.spec, n, options_.algorithm)) {
    return StrideCopy(*small, epoch.me, *epoch.strides, job.spec, data, options, &job.stats);
  }
  if (auto passes = DirectTransferSchedule(job.spec, n, options_.algorithm)) {
    return DirectTransfer(*passes, epoch.me, *epoch.strides, job.spec, data, options, &job.stats);
  }
  return on_the_ring();
}

void CollectiveExecutor::PlaceBlockResult(CollectiveJob& job, const RingMember& me) {
  const size_t esize = IsValid(job.spec.dtype) ? DTypeSize(job.spec.dtype) : 0;
  if (const std::optional<uint64_t> block = ResultElements(job.spec, me.world_size)) {
    job.result_offset = static_cast<uint64_t>(me.rank) * *block * esize;
    job.result_bytes = *block * esize;
  }
}

void CollectiveExecutor::PlaceUnevenResult(CollectiveJob& job, const RingMember& me) {
  const size_t esize = IsValid(job.spec.dtype) ? DTypeSize(job.spec.dtype) : 0;
  if (const std::optional<uint64_t> result = ResultElements(job.spec, me.world_size)) {
    job.result_offset = job.spec.count * esize;
    job.result_bytes = *result * esize;
  }
}

absl::Status CollectiveExecutor::RejectLeftOutRoot(const CollectiveJob& job, RingEpoch& epoch,
                                                   const RingOptions& options) const {
  // The client copied nothing in (or has nowhere to take a gather's result), taking its
  // rank for another: what the memory holds is stale. Every rank fails before a byte moves.
  return RejectBeforeRunning(
      epoch, job.spec, options,
      absl::FailedPreconditionError(absl::StrCat(
          "this rank is the ", CollectiveKindName(job.spec.kind), "'s root, but its training "
          "process left its ", job.output_left_out ? "output" : "tensor",
          " out, taking its rank for another (the ring re-formed since the call); call again")));
}

absl::Status CollectiveExecutor::RunAllReduceAlgorithm(AllReduceAlgorithm algorithm,
                                                       CollectiveJob& job, RingEpoch& epoch,
                                                       absl::Span<std::byte> data,
                                                       const RingOptions& options) {
  const RingMember& me = epoch.me;
  Link& link = *epoch.link;
  const std::optional<StrideSchedule> schedule = StrideScheduleOf(algorithm);
  if (schedule.has_value() && epoch.strides != nullptr) {
    return StrideAllReduce(*schedule, me, *epoch.strides, reducer_, job.spec, data, options,
                           &job.stats);
  }
  // An epoch without stride links (an EpochSource of tests) relays; ranks that do
  // otherwise meet on the ring link and fail naming the difference.
  if (schedule.has_value() || algorithm == AllReduceAlgorithm::kRelay) {
    return RelayAllReduce(me, link, reducer_, job.spec, data, options, &job.stats);
  }
  return RingAllReduce(me, link, reducer_, job.spec, data, options, &job.stats);
}

std::optional<Frame> CollectiveExecutor::DropLeftovers(RingEpoch& epoch, uint64_t skip_through) {
  Link& link = *epoch.link;
  const WaitLimit now{SteadyDeadline(absl::ZeroDuration()), &epoch.over};
  while (true) {
    absl::StatusOr<Frame> next = link.Peek(now);
    if (!next.ok()) return std::nullopt;
    if (next->sequence < epoch.next_sequence) {
      // A leftover of a collective this rank finished. Dropping it promptly also frees the
      // left neighbour, whose sender may still be blocked on it.
    } else if (next->sequence <= skip_through &&
               (next->kind == FrameKind::kAbort ||
                next->sequence <= link.newest_aborted_sequence())) {
      // The ring gave up a collective before this rank's client attached: it is over for
      // everyone, and this client will not issue it.
      epoch.next_sequence = next->sequence + 1;
      link.MarkFinished(next->sequence);
    } else {
      return *next;  // a collective the ring is running
    }
    if (next->kind == FrameKind::kAbort && next->sequence > epoch.newest_run &&
        next->abort_origin != epoch.me.rank) {
      // The abort of a collective this rank skipped: it goes on around the ring, as a
      // rank running it would forward it, so that every rank skips it alike.
      Frame forward = *next;
      forward.sender_rank = epoch.me.rank;
      link.Send(forward, {}, WaitLimit{SteadyDeadline(options_.abort_notice_timeout), &epoch.over})
          .IgnoreError();  // best effort, as for any abort notice
    }
    link.Receive(now).IgnoreError();
  }
}

void CollectiveExecutor::AlignWithRing(RingEpoch& epoch) {
  std::optional<Frame> next = DropLeftovers(epoch, SkipThrough());
  if (next.has_value() && next->sequence > epoch.next_sequence) {
    spdlog::warn("{}: the ring is at collective #{} while this rank expected #{}: its "
                 "training process missed the ones between (it was away); continuing at #{}",
                 epoch.Describe(epoch.me.rank), next->sequence, epoch.next_sequence,
                 next->sequence);
    epoch.next_sequence = next->sequence;
  }
}

}  // namespace ringsync
