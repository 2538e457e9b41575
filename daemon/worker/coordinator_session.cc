#include "daemon/worker/coordinator_session.h"

#include <algorithm>
#include <limits>
#include <optional>

#include "absl/random/random.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/sync/monotonic_clock.h"
#include "wire/grpc_options.h"
#include "daemon/logging/string_view_formatter.h"
#include "daemon/worker/ring_watch_reader.h"
#include "spdlog/spdlog.h"
#include "wire/proto_convert.h"
#include "wire/protocol_version.h"

namespace ringsync {
namespace {

constexpr absl::Duration kRpcTimeout = absl::Seconds(5);
constexpr absl::Duration kRetryPause = absl::Milliseconds(200);

uint64_t RandomIncarnation() {
  absl::BitGen random;
  return absl::Uniform<uint64_t>(absl::IntervalClosed, random, 1,
                                 std::numeric_limits<uint64_t>::max());
}

void SleepUnless(std::stop_token& stop, absl::Duration d) {
  const SteadyDeadline until(d);
  while (!stop.stop_requested() && !until.Passed()) absl::SleepFor(absl::Milliseconds(20));
}

}  // namespace

CoordinatorSession::CoordinatorSession(CoordinatorSessionOptions options, ViewCallback on_view,
                                       ReportCallback report, SessionLostCallback on_session_lost)
    : options_(std::move(options)),
      on_view_(std::move(on_view)),
      report_(std::move(report)),
      on_session_lost_(std::move(on_session_lost)),
      incarnation_(options_.incarnation != 0 ? options_.incarnation : RandomIncarnation()) {
  stub_ = v1::Coordinator::NewStub(
      options_.security.CreateChannel(options_.coordinator_target,
                                      ControlChannelArguments(options_.keepalive)));
}

CoordinatorSession::~CoordinatorSession() { Stop(); }

absl::Status CoordinatorSession::Join(SteadyDeadline deadline) {
  absl::Status last = absl::DeadlineExceededError("no attempt");
  while (!deadline.Passed()) {
    v1::JoinRequest request;
    request.set_protocol_version(kProtocolVersion);
    request.set_worker_id(options_.worker_id);
    request.set_peer_address(options_.peer_address);
    request.set_http_address(options_.http_address);
    if (options_.known_generation) request.set_last_generation(options_.known_generation());
    request.set_incarnation(incarnation_);
    ToProto(options_.ring_settings, request.mutable_ring_settings());
    {
      absl::MutexLock lock(&mu_);
      if (newest_view_.generation() != 0) *request.mutable_current_view() = newest_view_;
    }
    v1::JoinResponse response;
    grpc::ClientContext context;
    const absl::Time sent_at = MonotonicNow();
    // Not wait-for-ready: a coordinator that is not up yet is retried below all the same,
    // and a failed TLS handshake then says so instead of ending as a bare deadline.
    context.set_deadline(absl::ToChronoTime(absl::Now() + std::min(deadline.Left(), kRpcTimeout)));
    const grpc::Status status = stub_->Join(&context, request, &response);
    if (status.ok()) {
      absl::MutexLock lock(&mu_);
      session_token_ = response.session_token();
      if (response.heartbeat_interval_ms() > 0) {
        heartbeat_interval_ = absl::Milliseconds(response.heartbeat_interval_ms());
      }
      if (response.lease_ms() > 0) lease_ = absl::Milliseconds(response.lease_ms());
      spdlog::info("joined coordinator {} as incarnation {} (world size {}..{})",
                   options_.coordinator_target, incarnation_, response.min_world_size(),
                   response.world_size());
    }
    if (status.ok()) {
      Renewed(sent_at);
      return absl::OkStatus();
    }
    last = absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
    // A refusal (duplicate id, full ring, protocol, ring settings) will not change by retrying.
    if (status.error_code() != grpc::StatusCode::UNAVAILABLE &&
        status.error_code() != grpc::StatusCode::DEADLINE_EXCEEDED) {
      break;
    }
    absl::SleepFor(kRetryPause);
  }
  const bool handshake = absl::StrContains(last.message(), "andshake");
  return absl::Status(
      last.code(),
      absl::StrCat("joining coordinator ", options_.coordinator_target, " as worker ",
                   options_.worker_id, ": ", last.message(),
                   handshake ? "; the TLS handshake failed: the coordinator's certificate and "
                               "this worker's (--tls_cert) must be signed by the CA both name "
                               "in --tls_ca, and the coordinator's must name the host dialled"
                             : ""));
}

absl::Status CoordinatorSession::Start() {
  if (absl::Status s = Join(SteadyDeadline(options_.join_timeout)); !s.ok()) return s;
  watch_thread_ = std::jthread([this](std::stop_token stop) { WatchLoop(stop); });
  heartbeat_thread_ = std::jthread([this](std::stop_token stop) { HeartbeatLoop(stop); });
  lease_thread_ = std::jthread([this](std::stop_token stop) { LeaseLoop(stop); });
  return absl::OkStatus();
}

void CoordinatorSession::Renewed(absl::Time sent_at) {  // on MonotonicNow's clock
  absl::Duration lease;
  {
    absl::MutexLock lock(&mu_);
    lease = lease_;
  }
  if (lease > absl::ZeroDuration() && options_.on_lease_renewed) {
    options_.on_lease_renewed(sent_at + lease);
  }
}

void CoordinatorSession::LeaseLoop(std::stop_token stop) {
  while (!stop.stop_requested()) {
    absl::Duration lease;
    {
      absl::MutexLock lock(&mu_);
      lease = lease_;
    }
    if (lease > absl::ZeroDuration() && options_.check_lease) options_.check_lease();
    SleepUnless(stop, lease > absl::ZeroDuration()
                          ? std::clamp(lease / 10, absl::Milliseconds(5), absl::Milliseconds(100))
                          : absl::Milliseconds(100));
  }
}

void CoordinatorSession::WatchLoop(std::stop_token stop) {
  while (!stop.stop_requested()) {
    auto context = std::make_shared<grpc::ClientContext>();
    v1::WatchRingRequest request;
    {
      absl::MutexLock lock(&mu_);
      request.set_session_token(session_token_);
      watch_context_ = context;
    }
    request.set_worker_id(options_.worker_id);
    if (stop.stop_requested()) break;
    grpc::Status status;
    {
      RingWatchReader reader(*stub_, *context, request);
      while (std::optional<v1::RingView> view = reader.Next()) {
        Remember(*view);
        on_view_(*view);
      }
      status = reader.status();
    }
    if (stop.stop_requested()) break;
    spdlog::warn("ring watch ended ({}); reconnecting to the coordinator", status.error_message());
    SleepUnless(stop, kRetryPause);
    if (status.error_code() == grpc::StatusCode::NOT_FOUND) {
      // The coordinator forgot this worker (it restarted, or declared it dead): rejoin.
      Rejoin(request.session_token(), status.error_message(), SteadyDeadline(options_.join_timeout));
    }
  }
}

void CoordinatorSession::Remember(const v1::RingView& view) {
  absl::MutexLock lock(&mu_);
  if (view.generation() > newest_view_.generation()) newest_view_ = view;
}

void CoordinatorSession::Rejoin(uint64_t lost_token, absl::string_view why,
                                SteadyDeadline deadline) {
  // Both loops notice a lost session; the first rejoins, the second finds the token
  // replaced and goes on with the new session (a second Join would be refused).
  absl::MutexLock rejoining(&rejoin_mu_);
  {
    absl::MutexLock lock(&mu_);
    if (session_token_ != lost_token) return;
  }
  if (on_session_lost_) on_session_lost_(why);
  if (absl::Status s = Join(deadline); !s.ok()) spdlog::error("{}", s.message());
}

void CoordinatorSession::HeartbeatLoop(std::stop_token stop) {
  while (!stop.stop_requested()) {
    v1::HeartbeatRequest request;
    absl::Duration interval;
    {
      absl::MutexLock lock(&mu_);
      request.set_session_token(session_token_);
      interval = heartbeat_interval_;
    }
    request.set_worker_id(options_.worker_id);
    report_(&request);
    v1::HeartbeatResponse response;
    grpc::ClientContext context;
    const absl::Time sent_at = MonotonicNow();
    // A heartbeat lost in a cut link must not hold up the next one: each may take one
    // interval, so fresh ones keep going out and the first after the link heals renews
    // the lease (one waiting out 5 s let a 3.3 s cut lose the lease after the link was
    // back).
    context.set_deadline(absl::ToChronoTime(
        absl::Now() + std::clamp(interval, absl::Milliseconds(100), kRpcTimeout)));
    const grpc::Status status = stub_->Heartbeat(&context, request, &response);
    if (status.ok()) Renewed(sent_at);
    if (status.error_code() == grpc::StatusCode::NOT_FOUND && !stop.stop_requested()) {
      spdlog::warn("coordinator does not know this worker ({}); rejoining", status.error_message());
      Rejoin(request.session_token(), status.error_message(), SteadyDeadline(kRpcTimeout));
      continue;
    }
    SleepUnless(stop, interval - (MonotonicNow() - sent_at));  // one heartbeat per interval
  }
}

void CoordinatorSession::Stop() {
  if (stopped_) return;
  stopped_ = true;
  watch_thread_.request_stop();
  heartbeat_thread_.request_stop();
  {
    absl::MutexLock lock(&mu_);
    if (watch_context_ != nullptr) watch_context_->TryCancel();
  }
  lease_thread_.request_stop();
  if (watch_thread_.joinable()) watch_thread_.join();
  if (heartbeat_thread_.joinable()) heartbeat_thread_.join();
  if (lease_thread_.joinable()) lease_thread_.join();
  v1::LeaveRequest request;
  {
    absl::MutexLock lock(&mu_);
    request.set_session_token(session_token_);
  }
  request.set_worker_id(options_.worker_id);
  request.set_reason("worker shutting down");
  v1::LeaveResponse response;
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(1)));
  stub_->Leave(&context, request, &response);  // best effort
}

}  // namespace ringsync
