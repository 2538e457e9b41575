#include "daemon/worker/worker_service.h"

#include <unistd.h>

#include <filesystem>
#include <memory>
#include <system_error>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "wire/grpc_status.h"
#include "daemon/logging/string_view_formatter.h"
#include "spdlog/spdlog.h"
#include "wire/protocol_version.h"

namespace ringsync {
namespace {

// How often the Attach stream looks whether its client is still there.
constexpr absl::Duration kClientPoll = absl::Milliseconds(20);
// How long a second Attach waits for the first client's departure to be noticed.
constexpr absl::Duration kReattachGrace = absl::Seconds(3);

// See worker.proto: marks a status as the worker's own verdict on the collective.
grpc::Status FromThisWorker(grpc::ServerContextBase* context, const absl::Status& status) {
  context->AddTrailingMetadata("ringsync-status-origin", "worker");
  return ToGrpc(status);
}

// One collective RPC from submission to answer, holding no thread meanwhile: the
// executor's completion of the job finishes the call, and the client's cancellation
// (it disconnected, or its deadline passed) cancels the job, which aborts the
// collective on every rank. gRPC owns the reactor until OnDone.
class CollectiveReactor final : public grpc::ServerUnaryReactor {
 public:
  CollectiveReactor(grpc::CallbackServerContext* context, v1::CollectiveResponse* response,
                    std::shared_ptr<CollectiveJob> job, std::string worker_id)
      : context_(context),
        response_(response),
        job_(std::move(job)),
        worker_id_(std::move(worker_id)) {
    job_->on_done = [this] { Answer(); };
  }

  void OnCancel() override {
    job_->client_gone.Cancel(absl::AbortedError(absl::StrCat(
        "the training process attached to worker ", worker_id_,
        " disconnected during the collective")));
  }
  void OnDone() override { delete this; }

 private:
  // Called once, by the executor, when the job has its result.
  void Answer() {
    const CollectiveJob& job = *job_;
    if (!job.status.ok()) {
      Finish(FromThisWorker(context_, job.status));
      return;
    }
    response_->set_generation(job.generation);
    response_->set_sequence(job.spec.sequence);
    response_->set_bytes_sent(job.stats.bytes_sent);
    response_->set_bytes_received(job.stats.bytes_received);
    response_->set_seconds(absl::ToDoubleSeconds(job.elapsed));
    if (!job.is_shared && !job.inline_data.empty()) {
      response_->set_inline_data(job.inline_data.data(), job.inline_data.size());
    }
    Finish(grpc::Status::OK);
  }

  grpc::CallbackServerContext* const context_;
  v1::CollectiveResponse* const response_;
  const std::shared_ptr<CollectiveJob> job_;
  const std::string worker_id_;
};

}  // namespace

WorkerService::WorkerService(WorkerServiceOptions options, RingManager& ring,
                             CollectiveExecutor& executor)
    : options_(std::move(options)),
      limits_{.shm_dir = options_.shm_dir, .default_timeout = options_.default_timeout},
      ring_(ring),
      executor_(executor) {}

void WorkerService::FillInfo(const RingStatus& status, v1::WorkerInfo* info) const {
  info->set_worker_id(options_.worker_id);
  info->set_rank(status.rank);
  info->set_world_size(status.world_size);
  info->set_generation(status.generation);
  info->set_ready(status.ready);
  info->set_reduce_device(options_.reduce_device);
  info->set_protocol_version(kProtocolVersion);
}

grpc::Status WorkerService::GetInfo(grpc::ServerContext*, const v1::GetInfoRequest*,
                                    v1::WorkerInfo* response) {
  FillInfo(ring_.Status(), response);
  return grpc::Status::OK;
}

grpc::ServerUnaryReactor* WorkerService::RunCollective(CollectiveKind kind,
                                                       grpc::CallbackServerContext* context,
                                                       const v1::CollectiveRequest& request,
                                                       v1::CollectiveResponse* response) {
  const absl::Time now = absl::Now();
  absl::StatusOr<std::shared_ptr<CollectiveJob>> made = JobFromRequest(kind, request, limits_, now);
  std::shared_ptr<CollectiveJob> job;
  if (made.ok()) {
    job = *std::move(made);
  } else {
    // The refusal takes the request's turn on the ring, failing it on every rank at once.
    const absl::Status why(made.status().code(),
                           absl::StrCat("worker ", options_.worker_id,
                                        " refused its client's request: ", made.status().message()));
    job = RefusedJob(kind, request, why, limits_, now);
    if (job == nullptr) {  // no turn to take: only this RPC fails
      grpc::ServerUnaryReactor* refused = context->DefaultReactor();
      refused->Finish(FromThisWorker(context, made.status()));
      return refused;
    }
  }
  // Owned by gRPC from here until its OnDone; the job may finish it before this returns
  // (the executor refuses it at once), which the callback API allows.
  auto* reactor = new CollectiveReactor(context, response, job, options_.worker_id);
  executor_.Submit(std::move(job));
  return reactor;
}

grpc::ServerUnaryReactor* WorkerService::AllReduce(grpc::CallbackServerContext* context,
                                                   const v1::CollectiveRequest* request,
                                                   v1::CollectiveResponse* response) {
  return RunCollective(CollectiveKind::kAllReduce, context, *request, response);
}

grpc::ServerUnaryReactor* WorkerService::Broadcast(grpc::CallbackServerContext* context,
                                                   const v1::CollectiveRequest* request,
                                                   v1::CollectiveResponse* response) {
  return RunCollective(CollectiveKind::kBroadcast, context, *request, response);
}

grpc::ServerUnaryReactor* WorkerService::AllGather(grpc::CallbackServerContext* context,
                                                   const v1::CollectiveRequest* request,
                                                   v1::CollectiveResponse* response) {
  return RunCollective(CollectiveKind::kAllGather, context, *request, response);
}

grpc::ServerUnaryReactor* WorkerService::Barrier(grpc::CallbackServerContext* context,
                                                 const v1::CollectiveRequest* request,
                                                 v1::CollectiveResponse* response) {
  return RunCollective(CollectiveKind::kBarrier, context, *request, response);
}

grpc::Status WorkerService::Attach(grpc::ServerContext* context, const v1::AttachRequest* request,
                                   grpc::ServerWriter<v1::WorkerEvent>* writer) {
  // A restarted training process may reconnect before the worker has noticed that its
  // previous incarnation is gone: give that a moment before refusing.
  const absl::Time give_up = absl::Now() + kReattachGrace;
  bool attached = executor_.Attach();
  while (!attached && absl::Now() < give_up && !context->IsCancelled()) {
    absl::SleepFor(kClientPoll);
    attached = executor_.Attach();
  }
  if (!attached) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        absl::StrCat("another training process is attached to worker ",
                                     options_.worker_id,
                                     "; each worker serves exactly one training process"));
  }
  spdlog::info("training process attached: {}", request->client_name());
  uint64_t seen = 0;
  while (!context->IsCancelled() && !stopping_) {
    const RingStatus status = ring_.AwaitChange(seen, kClientPoll);
    if (status.version == seen) continue;
    seen = status.version;
    v1::WorkerEvent event;
    FillInfo(status, event.mutable_info());
    if (!writer->Write(event)) break;
  }
  const std::string why = stopping_ ? "the worker is shutting down"
                                    : absl::StrCat("the training process attached to worker ",
                                                   options_.worker_id, " (", request->client_name(),
                                                   ") disconnected");
  spdlog::info("{}", why);
  executor_.Detach(absl::AbortedError(why));
  RemoveClientFiles(request->client_pid());
  return grpc::Status::OK;
}

grpc::Status WorkerService::Detach(grpc::ServerContext*, const v1::DetachRequest*,
                                   v1::DetachResponse*) {
  executor_.ExpectCleanDetach();
  return grpc::Status::OK;
}

void WorkerService::RemoveClientFiles(int64_t client_pid) {
  if (client_pid <= 0) return;
  const std::string prefix = absl::StrCat(SharedTensor::kNamePrefix, client_pid, "-");
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(options_.shm_dir, error)) {
    // Mappings of collectives still finishing stay valid: only the names go.
    if (absl::StartsWith(entry.path().filename().string(), prefix)) ::unlink(entry.path().c_str());
  }
}

}  // namespace ringsync
