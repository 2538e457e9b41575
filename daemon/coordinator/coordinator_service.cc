#include "daemon/coordinator/coordinator_service.h"

#include <algorithm>
#include <deque>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/sync/monotonic_clock.h"
#include "wire/grpc_options.h"
#include "wire/grpc_status.h"
#include "daemon/coordinator/request_validation.h"
#include "daemon/transport/tcp/socket_address.h"
#include "wire/reaction_order.h"
#include "spdlog/spdlog.h"
#include "wire/proto_convert.h"
#include "wire/protocol_version.h"
#include "wire/security/peer_identity.h"

namespace ringsync {
namespace {

// The IP address of a gRPC peer ("ipv4:198.18.0.3:50112" -> "198.18.0.3"); empty for
// a peer that is not on IP.
std::string ObservedHost(const std::string& peer) {
  absl::StatusOr<sockaddr_storage> address = AddressOfGrpcPeer(peer, 0);
  return address.ok() ? DescribeHost(*address) : std::string();
}

// Views a slow watcher may have queued; older ones are dropped first, since every
// view supersedes the ones before it.
constexpr size_t kMaxQueuedViews = 64;


std::string ProtocolName(int version) {
  if (v1::ProtocolVersion_IsValid(version)) {
    return absl::StrCat(v1::ProtocolVersion_Name(static_cast<v1::ProtocolVersion>(version)),
                        " (", version, ")");
  }
  return absl::StrCat("unknown version ", version);
}

grpc::Status ShuttingDown() {
  return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                      "the coordinator is shutting down; a formed ring keeps working, rejoin "
                      "when the coordinator is back");
}

}  // namespace

absl::Status ValidateCoordinatorOptions(const CoordinatorOptions& options) {
  if (options.max_world_size < 1 || options.max_world_size > Membership::kMaxWorldSize) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--max_world_size=", options.max_world_size,
        " is out of range (--world_size sets it too): give the largest number of workers in "
        "the ring, 1..",
        Membership::kMaxWorldSize));
  }
  if (options.min_world_size < 1 || options.min_world_size > options.max_world_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--min_world_size=", options.min_world_size, " is out of range: the ring needs at least "
        "one worker and at most --max_world_size=", options.max_world_size,
        ", so give 1..", options.max_world_size));
  }
  if (options.formation_grace < absl::ZeroDuration() ||
      options.formation_grace > absl::Minutes(10)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--formation_grace=", absl::FormatDuration(options.formation_grace),
        " is out of range: 0s..10m (how long arrivals must pause before the ring forms or "
        "grows, e.g. 1s)"));
  }
  if (options.heartbeat_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--heartbeat_timeout=", absl::FormatDuration(options.heartbeat_timeout),
        " must be positive, e.g. 5s"));
  }
  if (options.heartbeat_interval <= absl::ZeroDuration() ||
      options.heartbeat_interval >= options.heartbeat_timeout) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--heartbeat_interval=", absl::FormatDuration(options.heartbeat_interval),
        " must be positive and shorter than --heartbeat_timeout=",
        absl::FormatDuration(options.heartbeat_timeout),
        " (a few intervals per timeout, e.g. 1s and 5s)"));
  }
  if (options.max_message_bytes < (4 << 10) || options.max_message_bytes > (64 << 20)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--max_message_bytes=", options.max_message_bytes, " is out of range: 4096..",
        64 << 20, " (the default, 1 MiB, is plenty for any worker)"));
  }
  if (absl::StatusOr<std::string> target = NormalizeTarget(options.listen, PortUse::kListen); !target.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--listen: ", target.status().message()));
  }
  return absl::OkStatus();
}

void ToProto(const View& view, v1::RingView* out) {
  out->Clear();
  out->set_generation(view.generation);
  for (const ViewMember& member : view.members) {
    v1::RingMember* m = out->add_members();
    m->set_rank(member.rank);
    m->set_worker_id(member.worker_id);
    m->set_peer_address(member.peer_address);
    m->set_incarnation(member.incarnation);
    m->set_observed_host(member.observed_host);
  }
  out->set_dissolved_reason(view.dissolved_reason);
  out->set_change_reason(view.change_reason);
}

View FromProto(const v1::RingView& view) {
  View out;
  out.generation = view.generation();
  // One more than a ring may hold is enough for Membership to refuse the report.
  const int kept = std::min(view.members_size(), Membership::kMaxWorldSize + 1);
  out.members.reserve(kept);
  for (int i = 0; i < kept; ++i) {
    const v1::RingMember& m = view.members(i);
    // observed_host is not read: a view this coordinator publishes carries the addresses
    // it saw itself (Membership::Adopt).
    out.members.push_back(ViewMember{m.rank(), m.worker_id(), m.peer_address(), m.incarnation(),
                                     /*observed_host=*/""});
  }
  out.dissolved_reason = view.dissolved_reason();
  return out;
}

JoinInfo FromProto(const v1::JoinRequest& request, std::string observed_host) {
  JoinInfo info{request.worker_id(),        request.peer_address(),
                request.http_address(),     request.last_generation(),
                request.incarnation(),      FromProto(request.current_view()),
                std::move(observed_host)};
  const int kept =
      std::min(request.ring_settings_size(), static_cast<int>(kMaxRingSettings) + 1);
  info.ring_settings.reserve(kept);
  for (int i = 0; i < kept; ++i) {
    const v1::RingSetting& setting = request.ring_settings(i);
    info.ring_settings.push_back({setting.flag(), setting.value()});
  }
  return info;
}

// One open WatchRing stream. Writes views one at a time (the next when the previous is
// done: back-pressure without blocking a thread). Lock order: CoordinatorService::mu_
// before WatchReactor::mu_; gRPC never runs this reactor's callbacks inline, and the
// callbacks release mu_ before calling into the service.
class CoordinatorService::WatchReactor final : public grpc::ServerWriteReactor<v1::RingView> {
 public:
  WatchReactor(CoordinatorService* service, std::string worker_id, uint64_t session_token)
      : service_(service), worker_id_(std::move(worker_id)), session_token_(session_token) {
    HandToGrpc(this);  // gRPC orders this before the reactions; TSan cannot see how
  }

  bool Matches(absl::string_view worker_id, uint64_t session_token) const {
    return worker_id_ == worker_id && session_token_ == session_token;
  }

  // Queues `view` for sending. No effect once the stream is ending.
  void Push(const v1::RingView& view) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    if (ending_ || finished_ || broken_) return;
    if (pending_.size() == kMaxQueuedViews) pending_.pop_front();
    pending_.push_back(view);
    PumpLocked();
  }

  // Finishes the stream with `status` after the queued views are sent.
  void End(const grpc::Status& status) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    if (ending_ || finished_) return;
    ending_ = true;
    final_status_ = status;
    PumpLocked();
  }

  void OnWriteDone(bool ok) override {
    InReaction(this);
    bool newly_broken = false;
    {
      absl::MutexLock lock(&mu_);
      writing_ = false;
      if (!ok) newly_broken = MarkBrokenLocked();  // a failed write: the client is gone
      PumpLocked();
    }
    if (newly_broken) service_->OnWatchBroken(worker_id_, session_token_);
    HandToGrpc(this);  // OnDone, which deletes this, runs after this returns
  }

  void OnCancel() override {
    InReaction(this);
    bool newly_broken = false;
    {
      absl::MutexLock lock(&mu_);
      newly_broken = MarkBrokenLocked();
      PumpLocked();
    }
    if (newly_broken) service_->OnWatchBroken(worker_id_, session_token_);
    HandToGrpc(this);
  }

  void OnDone() override {
    InReaction(this);
    service_->Unregister(this);
    delete this;
  }

 private:
  void PumpLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (writing_ || finished_) return;
    if (!pending_.empty()) {
      in_flight_ = std::move(pending_.front());
      pending_.pop_front();
      writing_ = true;
      StartWrite(&in_flight_);
      return;
    }
    if (ending_) {
      finished_ = true;
      Finish(final_status_);
    }
  }

  // Returns true the first time: the caller then tells the service (without mu_ held).
  bool MarkBrokenLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (broken_) return false;
    broken_ = true;
    pending_.clear();
    if (!ending_) {
      ending_ = true;
      final_status_ = grpc::Status(grpc::StatusCode::CANCELLED, "watch stream broken");
    }
    return true;
  }

  CoordinatorService* const service_;
  const std::string worker_id_;
  const uint64_t session_token_;

  absl::Mutex mu_;
  std::deque<v1::RingView> pending_ ABSL_GUARDED_BY(mu_);
  v1::RingView in_flight_ ABSL_GUARDED_BY(mu_);  // must live until OnWriteDone
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool ending_ ABSL_GUARDED_BY(mu_) = false;    // Finish once the queue is empty
  bool finished_ ABSL_GUARDED_BY(mu_) = false;  // Finish was called
  bool broken_ ABSL_GUARDED_BY(mu_) = false;    // cancelled or a write failed
  grpc::Status final_status_ ABSL_GUARDED_BY(mu_);
};

CoordinatorService::CoordinatorService(const CoordinatorOptions& options)
    : options_(options),
      membership_(Membership::Options{options.min_world_size, options.max_world_size,
                                      options.heartbeat_timeout, options.heartbeat_interval,
                                      options.formation_grace}) {
  expiry_thread_ = std::thread([this] { ExpiryLoop(); });
}

CoordinatorService::~CoordinatorService() { BeginShutdown(); }

void CoordinatorService::BeginShutdown() {
  std::thread expiry;
  {
    absl::MutexLock lock(&mu_);
    if (shutting_down_) return;
    shutting_down_ = true;
    for (WatchReactor* watcher : watchers_) watcher->End(ShuttingDown());
    expiry = std::move(expiry_thread_);
  }
  if (expiry.joinable()) expiry.join();
}

void CoordinatorService::Refuse(absl::string_view reason, absl::string_view detail) {
  if (options_.refusals) {
    options_.refusals(reason, detail);
  } else {
    own_refusals_.Refuse(reason, detail);
  }
}

grpc::ServerUnaryReactor* CoordinatorService::Join(grpc::CallbackServerContext* context,
                                                   const v1::JoinRequest* request,
                                                   v1::JoinResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(DoJoin(*request, context->peer(), context->auth_context().get(), response));
  return reactor;
}

grpc::Status CoordinatorService::DoJoin(const v1::JoinRequest& request, const std::string& peer,
                                        const grpc::AuthContext* auth,
                                        v1::JoinResponse* response) {
  const std::string shown_id = SanitizeText(request.worker_id(), kMaxWorkerIdBytes);
  // A rogue Join: a caller with a valid certificate for another name asks for this
  // worker's rank (and so for its neighbours' gradients).
  if (absl::Status s = CheckClaimedWorker(IdentityOf(auth), request.worker_id(),
                                          options_.security.tls());
      !s.ok()) {
    Refuse("join_identity_mismatch", absl::StrCat("Join from ", peer, ": ", s.message()));
    return ToGrpc(s);
  }
  if (request.protocol_version() != kProtocolVersion) {
    const std::string message = absl::StrCat(
        "protocol version mismatch: worker '", shown_id, "' speaks ringsync protocol ",
        ProtocolName(request.protocol_version()), " but this coordinator speaks ",
        ProtocolName(kProtocolVersion),
        "; run the same ringsyncd release on the coordinator and every worker");
    Refuse("join_protocol", absl::StrCat("Join from ", peer, ": ", message));
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, message);
  }
  absl::MutexLock lock(&mu_);
  if (shutting_down_) return ShuttingDown();
  absl::StatusOr<uint64_t> token =
      membership_.Join(FromProto(request, ObservedHost(peer)), MonotonicNow());
  ProcessEventsLocked();
  if (!token.ok()) {
    Refuse("join", absl::StrCat("Join of worker '", shown_id, "' from ", peer, ": ",
                                          token.status().message()));
    return ToGrpc(token.status());
  }
  response->set_world_size(static_cast<uint32_t>(options_.max_world_size));
  response->set_min_world_size(static_cast<uint32_t>(options_.min_world_size));
  response->set_max_world_size(static_cast<uint32_t>(options_.max_world_size));
  response->set_session_token(*token);
  response->set_heartbeat_interval_ms(absl::ToInt64Milliseconds(options_.heartbeat_interval));
  response->set_lease_ms(absl::ToInt64Milliseconds(options_.heartbeat_timeout));
  return grpc::Status::OK;
}

grpc::ServerWriteReactor<v1::RingView>* CoordinatorService::WatchRing(
    grpc::CallbackServerContext* context, const v1::WatchRingRequest* request) {
  auto* watcher = new WatchReactor(this, request->worker_id(), request->session_token());
  absl::MutexLock lock(&mu_);
  if (shutting_down_) {
    watcher->End(ShuttingDown());
    return watcher;
  }
  const absl::Status session = membership_.CheckSession(
      request->worker_id(), request->session_token(), MonotonicNow());
  ProcessEventsLocked();
  if (!session.ok()) {
    Refuse("watch", absl::StrCat("WatchRing of worker '",
                                           SanitizeText(request->worker_id(), kMaxWorkerIdBytes),
                                           "' from ", context->peer(), ": ", session.message()));
    watcher->End(ToGrpc(session));
    return watcher;
  }
  watchers_.insert(watcher);
  v1::RingView current;
  ToProto(membership_.view(), &current);
  watcher->Push(current);
  spdlog::debug("worker {} watches the ring", request->worker_id());
  return watcher;
}

grpc::ServerUnaryReactor* CoordinatorService::Heartbeat(grpc::CallbackServerContext* context,
                                                        const v1::HeartbeatRequest* request,
                                                        v1::HeartbeatResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(DoHeartbeat(*request, response));
  return reactor;
}

grpc::Status CoordinatorService::DoHeartbeat(const v1::HeartbeatRequest& request,
                                             v1::HeartbeatResponse* response) {
  HeartbeatReport report;
  report.worker_id = request.worker_id();
  report.session_token = request.session_token();
  report.generation = request.generation();
  report.ready = request.ready();
  report.collectives_completed = request.collectives_completed();
  report.collectives_failed = request.collectives_failed();
  report.last_error = request.last_error();
  absl::MutexLock lock(&mu_);
  if (shutting_down_) return ShuttingDown();
  absl::StatusOr<uint64_t> generation = membership_.Heartbeat(report, MonotonicNow());
  ProcessEventsLocked();
  if (!generation.ok()) {
    Refuse("heartbeat",
                     absl::StrCat("Heartbeat of worker '",
                                  SanitizeText(request.worker_id(), kMaxWorkerIdBytes),
                                  "': ", generation.status().message()));
    return ToGrpc(generation.status());
  }
  response->set_current_generation(*generation);
  return grpc::Status::OK;
}

grpc::ServerUnaryReactor* CoordinatorService::Leave(grpc::CallbackServerContext* context,
                                                    const v1::LeaveRequest* request,
                                                    v1::LeaveResponse* /*response*/) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(DoLeave(*request, context->peer()));
  return reactor;
}

grpc::Status CoordinatorService::DoLeave(const v1::LeaveRequest& request,
                                         const std::string& peer) {
  absl::MutexLock lock(&mu_);
  if (shutting_down_) return ShuttingDown();
  const absl::Status status = membership_.Leave(request.worker_id(), request.session_token(),
                                                request.reason(), MonotonicNow());
  ProcessEventsLocked();
  if (!status.ok()) {
    Refuse("leave", absl::StrCat("Leave of worker '",
                                           SanitizeText(request.worker_id(), kMaxWorkerIdBytes),
                                           "' from ", peer, ": ", status.message()));
  }
  return ToGrpc(status);
}

grpc::ServerUnaryReactor* CoordinatorService::GetClusterStatus(
    grpc::CallbackServerContext* context, const v1::GetClusterStatusRequest* /*request*/,
    v1::ClusterStatus* response) {
  DoGetClusterStatus(response);
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

void CoordinatorService::DoGetClusterStatus(v1::ClusterStatus* response) {
  absl::MutexLock lock(&mu_);
  const absl::Time now = MonotonicNow();
  membership_.Expire(now);
  ProcessEventsLocked();
  response->set_world_size(static_cast<uint32_t>(membership_.max_world_size()));
  response->set_min_world_size(static_cast<uint32_t>(membership_.min_world_size()));
  response->set_max_world_size(static_cast<uint32_t>(membership_.max_world_size()));
  ToProto(membership_.view(), response->mutable_view());
  response->set_generations_published(membership_.view().generation);
  response->set_joins_total(joins_total_);
  const Membership::Counters& counters = membership_.counters();
  response->set_membership_changes_total(counters.membership_changes);
  response->set_views_adopted_total(counters.views_adopted);
  for (const auto& [reason, count] : counters.evictions) {
    (*response->mutable_evictions_total())[reason] = count;
  }
  for (const WorkerSnapshot& w : membership_.Workers(now)) {
    v1::WorkerStatus* out = response->add_workers();
    out->set_worker_id(w.worker_id);
    out->set_rank(w.rank);
    out->set_peer_address(w.peer_address);
    out->set_incarnation(w.incarnation);
    out->set_http_address(w.http_address);
    out->set_ready(w.ready);
    out->set_last_heartbeat_age_ms(absl::ToInt64Milliseconds(w.since_last_heartbeat));
    out->set_collectives_completed(w.collectives_completed);
    out->set_collectives_failed(w.collectives_failed);
    out->set_last_error(w.last_error);
    out->set_generation(w.generation);
    ToProto(w.ring_settings, out->mutable_ring_settings());
  }
}

void CoordinatorService::ProcessEventsLocked() {
  std::vector<MembershipEvent> ended;
  for (MembershipEvent& event : membership_.TakeEvents()) {
    switch (event.kind) {
      case MembershipEvent::Kind::kJoined:
        ++joins_total_;
        spdlog::info("{}", event.message);
        break;
      case MembershipEvent::Kind::kLeft:
        spdlog::info("{}", event.message);
        ended.push_back(std::move(event));
        break;
      case MembershipEvent::Kind::kLost:
        spdlog::warn("lost {}", event.message);
        ended.push_back(std::move(event));
        break;
      case MembershipEvent::Kind::kViewPublished: {
        if (event.view.formed()) {
          spdlog::info("{}", event.message);
        } else {
          spdlog::warn("{}", event.message);
        }
        v1::RingView view;
        ToProto(event.view, &view);
        for (WatchReactor* watcher : watchers_) watcher->Push(view);
        break;
      }
    }
  }
  // After the views: a leaving or lost worker still sees the dissolved view first.
  for (const MembershipEvent& event : ended) {
    const grpc::Status status(
        grpc::StatusCode::NOT_FOUND,
        absl::StrCat("the session of worker ", event.worker_id, " ended: ", event.message,
                     "; rejoin with Join"));
    for (WatchReactor* watcher : watchers_) {
      if (watcher->Matches(event.worker_id, event.session_token)) watcher->End(status);
    }
  }
}

void CoordinatorService::OnWatchBroken(const std::string& worker_id, uint64_t session_token) {
  absl::MutexLock lock(&mu_);
  if (shutting_down_) return;
  membership_.WatchClosed(worker_id, session_token, MonotonicNow());
  ProcessEventsLocked();
}

void CoordinatorService::Unregister(WatchReactor* watcher) {
  absl::MutexLock lock(&mu_);
  watchers_.erase(watcher);
}

void CoordinatorService::ExpiryLoop() {
  // A tenth of the timeout (or of the formation grace, when shorter): a lost worker is
  // noticed within 10% of --heartbeat_timeout and a ring forms within 10% of its grace;
  // at most 4 wake-ups a second, at least one per 10 ms.
  const absl::Duration tick =
      std::clamp(std::min(options_.heartbeat_timeout, options_.formation_grace) / 10,
                 absl::Milliseconds(10), absl::Milliseconds(250));
  absl::MutexLock lock(&mu_);
  while (!shutting_down_) {
    mu_.AwaitWithTimeout(absl::Condition(&shutting_down_), tick);
    if (shutting_down_) break;
    membership_.Expire(MonotonicNow());
    ProcessEventsLocked();
  }
}

}  // namespace ringsync
