#include "daemon/worker/ring_manager.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "daemon/logging/log_context.h"
#include "daemon/logging/string_view_formatter.h"
#include "spdlog/spdlog.h"

namespace ringsync {
namespace {

// How often a pause between connection attempts looks whether the generation ended.
constexpr absl::Duration kConnectRetrySlice = absl::Milliseconds(50);

}  // namespace

RingManager::RingManager(std::string worker_id, LinkFactory& links, absl::Duration connect_timeout,
                         ConnectRetry retry, StridesAhead strides_ahead)
    : worker_id_(std::move(worker_id)),
      links_(links),
      connect_timeout_(connect_timeout),
      retry_(retry),
      strides_ahead_(std::move(strides_ahead)) {
  status_.detail = "waiting for the coordinator to form the ring";
}

RingManager::~RingManager() { Shutdown(); }

void RingManager::SetStatus(RingStatus status) {
  status.version = status_.version + 1;
  status_ = std::move(status);
}

void RingManager::OnView(const v1::RingView& view) {
  std::shared_ptr<RingEpoch> retired;
  std::shared_ptr<RingEpoch> epoch;
  {
    absl::MutexLock lock(&mu_);
    if (view.generation() <= generation_) {
      if (suspended_) Resume(view.generation());
      return;
    }
    generation_ = view.generation();
    retired = std::move(epoch_);
    suspended_ = false;
    left_out_ = false;

    int my_rank = -1;
    for (int r = 0; r < view.members_size(); ++r) {
      if (view.members(r).worker_id() == worker_id_) my_rank = r;
    }
    SetLogRing(my_rank, view.generation());  // every log line from here on names them
    if (membership_.OnView(view, my_rank)) {
      spdlog::warn("the ring's membership changed: {}",
                   membership_.snapshot().last_change->Describe());
    }
    RingStatus status;
    status.generation = view.generation();
    status.membership = membership_.snapshot().id;
    if (my_rank < 0) {
      status.detail = view.dissolved_reason().empty()
                          ? absl::StrCat("generation ", view.generation(), " does not include this worker")
                          : absl::StrCat("the ring dissolved (generation ", view.generation(),
                                         "): ", view.dissolved_reason());
      left_out_ = true;
      SetStatus(status);
    } else {
      epoch = std::make_shared<RingEpoch>();
      epoch->me = RingMember{my_rank, view.members_size(), view.generation()};
      for (const v1::RingMember& m : view.members()) {
        epoch->worker_ids.push_back(m.worker_id());
        epoch->peer_addresses.push_back(m.peer_address());
        epoch->observed_hosts.push_back(m.observed_host());
      }
      epoch_ = epoch;
      status.rank = my_rank;
      status.world_size = view.members_size();
      status.detail = "connecting to the ring neighbours";
      SetStatus(status);
    }
  }
  const std::string why =
      view.dissolved_reason().empty()
          ? absl::StrCat("generation ", view.generation(), " replaced it")
          : absl::StrCat("the ring dissolved: ", view.dissolved_reason());
  if (retired != nullptr) {
    retired->over.Cancel(absl::AbortedError(
        absl::StrCat("generation ", retired->me.generation, " ended: ", why)));
  }
  links_.RetireBefore(view.generation(), absl::AbortedError(absl::StrCat("generation ended: ", why)));
  if (epoch != nullptr) {
    const int next = epoch->me.next();
    spdlog::info("generation {}: rank {} of {}; connecting to {} at {}", view.generation(),
                 epoch->me.rank, epoch->me.world_size, epoch->Describe(next),
                 epoch->peer_addresses[next]);
    std::jthread previous;  // its epoch is cancelled, so it ends at once; joined below
    absl::MutexLock lock(&connector_mu_);
    previous = std::exchange(connector_, std::jthread([this, epoch] { Connect(epoch); }));
  } else {
    spdlog::warn("generation {}: not in the ring ({})", view.generation(), view.dissolved_reason());
  }
}

void RingManager::Connect(std::shared_ptr<RingEpoch> epoch) {
  // A neighbour that does not answer in time (still starting, its name not resolvable
  // yet, a connection lost on the way) is tried again until the generation ends: every
  // member may be alive, so nothing else would ever re-form this ring.
  absl::Duration backoff = retry_.first;
  EpochStrideLinks* formed = nullptr;
  while (formed == nullptr) {
    absl::StatusOr<std::unique_ptr<Link>> link =
        links_.Connect(*epoch, WaitLimit{SteadyDeadline(connect_timeout_), &epoch->over});
    {
      absl::MutexLock lock(&mu_);
      if (epoch_ != epoch || epoch->over.IsCancelled()) return;  // a newer view, or shutdown
      if (link.ok()) {
        epoch->link = *std::move(link);
        formed = &Form(*epoch);
        break;
      }
      spdlog::error("generation {}: could not connect the ring (trying again in {}): {}",
                    epoch->me.generation, absl::FormatDuration(backoff), link.status().message());
      RingStatus status = status_;
      status.detail = absl::StrCat("could not connect the ring of generation ",
                                   epoch->me.generation, " (trying again): ",
                                   link.status().message());
      SetStatus(status);
    }
    for (const SteadyDeadline until(backoff); !until.Passed();) {
      if (epoch->over.IsCancelled()) return;
      absl::SleepFor(std::min(kConnectRetrySlice, until.Left()));
    }
    backoff = std::min(backoff * 2, retry_.max);
  }
  if (strides_ahead_ == nullptr) return;
  const std::vector<int> strides = strides_ahead_(epoch->me.world_size);
  if (strides.empty()) return;
  if (formed->ConnectAhead(strides, WaitLimit{SteadyDeadline(connect_timeout_), &epoch->over})
          .ok()) {
    spdlog::info("generation {}: connected the links of strides {} ahead of their first use",
                 epoch->me.generation, absl::StrJoin(strides, ", "));
  }
}

EpochStrideLinks& RingManager::Form(RingEpoch& epoch) {
  auto strides = std::make_unique<EpochStrideLinks>(epoch, links_, stride_links_connected_);
  EpochStrideLinks& formed = *strides;
  epoch.strides = std::move(strides);
  if (suspended_) return formed;  // Resume() makes it ready
  MarkReady();
  spdlog::info("generation {}: ring formed; rank {} of {} is ready", epoch.me.generation,
               epoch.me.rank, epoch.me.world_size);
  return formed;
}


bool RingManager::IsReady() const {
  return epoch_ != nullptr && epoch_->link != nullptr && !suspended_ && !LeaseLapsed();
}

std::string RingManager::FencedDetail() const {
  return absl::StrCat(
      "generation ", generation_, " is fenced: this worker's lease with the coordinator ran out ",
      absl::FormatDuration(absl::Trunc(MonotonicNow() - lease_until_, absl::Milliseconds(1))),
      " ago (renewed last ",
      absl::FormatDuration(absl::Trunc(MonotonicNow() - lease_renewed_at_, absl::Milliseconds(1))),
      " ago: was the worker frozen or cut off?); it may have been replaced, so no collective "
      "starts here until the coordinator answers again");
}

void RingManager::MarkReady() {
  RingStatus status = status_;
  status.ready = !LeaseLapsed();
  status.detail = status.ready ? "" : FencedDetail();
  SetStatus(status);
}

void RingManager::RenewLease(absl::Time until) {
  absl::MutexLock lock(&mu_);
  if (lease_until_ != absl::InfiniteFuture() && until <= lease_until_) return;
  lease_until_ = until;
  lease_renewed_at_ = MonotonicNow();
  if (!fenced_ || LeaseLapsed()) return;
  fenced_ = false;
  spdlog::warn("generation {}: the coordinator renewed this worker's lease; it takes "
               "collectives again", generation_);
  if (IsReady()) MarkReady();
}

void RingManager::CheckLease() {
  absl::MutexLock lock(&mu_);
  if (fenced_ || !LeaseLapsed()) return;
  fenced_ = true;
  RingStatus status = status_;
  status.ready = false;
  status.detail = FencedDetail();
  SetStatus(status);
  spdlog::warn("{}", status.detail);
}

void RingManager::Suspend(absl::string_view why) {
  absl::MutexLock lock(&mu_);
  if (epoch_ == nullptr || suspended_) return;
  suspended_ = true;
  RingStatus status = status_;
  status.ready = false;
  status.detail = absl::StrCat("generation ", generation_,
                               " is suspended: the coordinator does not know this worker's "
                               "session (",
                               why, "); waiting for its next ring view");
  SetStatus(status);
  spdlog::warn("{}", status.detail);
}

void RingManager::Resume(uint64_t coordinator_generation) {
  suspended_ = false;
  if (!IsReady()) return;  // still connecting: Connect() makes it ready
  MarkReady();
  spdlog::warn(
      "generation {} resumed: the coordinator's view is of generation {} (it restarted); "
      "the ring formed before goes on",
      generation_, coordinator_generation);
}

absl::StatusOr<std::shared_ptr<RingEpoch>> RingManager::AwaitReady(const WaitLimit& limit) {
  absl::MutexLock lock(&mu_);
  auto settled = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return IsReady() || left_out_; };
  if (absl::Status s = AwaitWithLimit(mu_, absl::Condition(&settled), limit, "waiting for the ring");
      !s.ok()) {
    return absl::Status(s.code(), absl::StrCat(s.message(), " (", StatusLocked().detail, ")"));
  }
  if (left_out_) return absl::UnavailableError(status_.detail);
  return epoch_;
}

MembershipSnapshot RingManager::Membership() {
  absl::MutexLock lock(&mu_);
  return membership_.snapshot();
}

std::shared_ptr<RingEpoch> RingManager::Ready() {
  absl::MutexLock lock(&mu_);
  return IsReady() ? epoch_ : nullptr;
}

RingStatus RingManager::Status() const {
  absl::MutexLock lock(&mu_);
  return StatusLocked();
}

RingStatus RingManager::StatusLocked() const {
  RingStatus status = status_;
  if (status.ready && LeaseLapsed()) {
    // Not published yet (CheckLease runs periodically): fenced all the same.
    status.ready = false;
    status.detail = FencedDetail();
  }
  return status;
}

RingStatus RingManager::AwaitChange(uint64_t seen, absl::Duration wait) const {
  absl::MutexLock lock(&mu_);
  auto changed = [this, seen]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return status_.version != seen; };
  mu_.AwaitWithTimeout(absl::Condition(&changed), wait);
  return StatusLocked();
}

void RingManager::Shutdown() {
  std::shared_ptr<RingEpoch> epoch;
  {
    absl::MutexLock lock(&mu_);
    epoch = std::move(epoch_);
    generation_ = std::numeric_limits<uint64_t>::max();
  }
  if (epoch != nullptr) epoch->over.Cancel(absl::UnavailableError("the worker is shutting down"));
  links_.CloseAll(absl::UnavailableError("the worker is shutting down"));
  std::jthread connector;
  {
    absl::MutexLock lock(&connector_mu_);
    connector = std::move(connector_);
  }
}  // joins the connector, which ends promptly: its epoch is cancelled

}  // namespace ringsync
