#include "daemon/worker/worker_service.h"

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <system_error>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "wire/grpc_status.h"
#include "daemon/logging/string_view_formatter.h"
#include "wire/proto_convert.h"
#include "spdlog/spdlog.h"

namespace ringsync {
namespace {

constexpr size_t kMaxNameLength = 1024;
constexpr uint64_t kMaxElements = uint64_t{1} << 40;
constexpr int64_t kMaxTimeoutMs = int64_t{24} * 3600 * 1000;
// How often a waiting RPC looks whether its client is still there.
constexpr absl::Duration kClientPoll = absl::Milliseconds(20);
// How long a second Attach waits for the first client's departure to be noticed.
constexpr absl::Duration kReattachGrace = absl::Seconds(3);

// See worker.proto: marks a status as the worker's own verdict on the collective.
grpc::Status FromThisWorker(grpc::ServerContext* context, const absl::Status& status) {
  context->AddTrailingMetadata("ringsync-status-origin", "worker");
  return ToGrpc(status);
}

absl::Status Invalid(absl::string_view field, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("invalid ", field, ": ", why));
}

}  // namespace

WorkerService::WorkerService(WorkerServiceOptions options, RingManager& ring,
                             CollectiveExecutor& executor)
    : options_(std::move(options)), ring_(ring), executor_(executor) {}

void WorkerService::FillInfo(const RingStatus& status, v1::WorkerInfo* info) const {
  info->set_worker_id(options_.worker_id);
  info->set_rank(status.rank);
  info->set_world_size(status.world_size);
  info->set_generation(status.generation);
  info->set_ready(status.ready);
  info->set_reduce_device(options_.reduce_device);
  info->set_protocol_version(v1::PROTOCOL_VERSION_1);
}

grpc::Status WorkerService::GetInfo(grpc::ServerContext*, const v1::GetInfoRequest*,
                                    v1::WorkerInfo* response) {
  FillInfo(ring_.Status(), response);
  return grpc::Status::OK;
}

absl::StatusOr<std::shared_ptr<CollectiveJob>> WorkerService::MakeJob(
    CollectiveKind kind, const v1::CollectiveRequest& request) {
  auto job = std::make_shared<CollectiveJob>();
  CollectiveSpec& spec = job->spec;
  spec.kind = kind;
  if (request.name().size() > kMaxNameLength) return Invalid("name", "longer than 1024 bytes");
  spec.name = request.name();
  if (kind == CollectiveKind::kBarrier) {
    spec.dtype = DType::kUInt8;
    const bool has_data = request.data_case() == v1::CollectiveRequest::kShared ||
                          !request.inline_data().empty();
    if (request.count() != 0 || has_data) {
      return Invalid("barrier", "a barrier carries no data (count must be 0)");
    }
  } else {
    absl::StatusOr<DType> dtype = FromProto(request.dtype());
    if (!dtype.ok()) return Invalid("dtype", dtype.status().message());
    spec.dtype = *dtype;
  }
  if (kind == CollectiveKind::kAllReduce) {
    absl::StatusOr<ReduceOp> op = FromProto(request.op());
    if (!op.ok()) return Invalid("op", op.status().message());
    spec.op = *op;
  }
  if (request.count() > kMaxElements) return Invalid("count", "more than 2^40 elements");
  spec.count = request.count();
  spec.root = request.root();
  if (kind == CollectiveKind::kBroadcast && spec.root < 0) return Invalid("root", "negative");
  spec.pre_scale = request.pre_scale() == 0 ? 1.0 : request.pre_scale();
  spec.post_scale = request.post_scale() == 0 ? 1.0 : request.post_scale();
  if (!std::isfinite(spec.pre_scale) || !std::isfinite(spec.post_scale)) {
    return Invalid("scale", "pre_scale and post_scale must be finite");
  }
  if (request.timeout_ms() < 0 || request.timeout_ms() > kMaxTimeoutMs) {
    return Invalid("timeout_ms", "must be between 0 (the worker's default) and one day");
  }
  if (request.client_sequence() == 0) {
    return Invalid("client_sequence", "must count 1, 2, 3, ... per attached client");
  }
  job->client_sequence = request.client_sequence();
  job->deadline = absl::Now() + (request.timeout_ms() > 0 ? absl::Milliseconds(request.timeout_ms())
                                                          : options_.default_timeout);
  const uint64_t bytes = spec.count * DTypeSize(spec.dtype);
  switch (request.data_case()) {
    case v1::CollectiveRequest::kInlineData:
      if (request.inline_data().size() != bytes) {
        return Invalid("inline_data", absl::StrCat(request.inline_data().size(), " bytes for ",
                                                   spec.count, " x ", DTypeName(spec.dtype),
                                                   " (", bytes, " expected)"));
      }
      job->inline_data.resize(bytes);
      if (bytes > 0) std::memcpy(job->inline_data.data(), request.inline_data().data(), bytes);
      break;
    case v1::CollectiveRequest::kShared: {
      const v1::SharedTensor& shared = request.shared();
      // An all-gather's region holds every rank's slot; others exactly the tensor.
      const bool size_ok = kind == CollectiveKind::kAllGather ? shared.size_bytes() >= bytes
                                                              : shared.size_bytes() == bytes;
      if (!size_ok) {
        return Invalid("shared.size_bytes", absl::StrCat(shared.size_bytes(), " bytes for ",
                                                         spec.count, " x ", DTypeName(spec.dtype)));
      }
      absl::StatusOr<SharedTensor> mapped = SharedTensor::Map(
          options_.shm_dir, shared.path(), shared.offset(), shared.size_bytes(), shared.reuse());
      if (!mapped.ok()) return mapped.status();
      job->is_shared = true;
      job->shared = *std::move(mapped);
      break;
    }
    case v1::CollectiveRequest::DATA_NOT_SET:
      if (bytes != 0) return Invalid("data", "neither inline_data nor shared is set");
      break;
  }
  return job;
}

grpc::Status WorkerService::RunCollective(CollectiveKind kind, grpc::ServerContext* context,
                                          const v1::CollectiveRequest& request,
                                          v1::CollectiveResponse* response) {
  absl::StatusOr<std::shared_ptr<CollectiveJob>> made = MakeJob(kind, request);
  if (!made.ok()) return FromThisWorker(context, made.status());
  std::shared_ptr<CollectiveJob> job = *std::move(made);
  executor_.Submit(job);
  while (!job->done.WaitForNotificationWithTimeout(kClientPoll)) {
    if (context->IsCancelled() && !job->client_gone.IsCancelled()) {
      job->client_gone.Cancel(absl::AbortedError(absl::StrCat(
          "the training process attached to worker ", options_.worker_id,
          " disconnected during the collective")));
    }
  }
  if (!job->status.ok()) return FromThisWorker(context, job->status);
  response->set_generation(job->generation);
  response->set_sequence(job->spec.sequence);
  response->set_bytes_sent(job->stats.bytes_sent);
  response->set_bytes_received(job->stats.bytes_received);
  response->set_seconds(absl::ToDoubleSeconds(job->elapsed));
  if (!job->is_shared && !job->inline_data.empty()) {
    response->set_inline_data(job->inline_data.data(), job->inline_data.size());
  }
  return grpc::Status::OK;
}

grpc::Status WorkerService::AllReduce(grpc::ServerContext* context,
                                      const v1::CollectiveRequest* request,
                                      v1::CollectiveResponse* response) {
  return RunCollective(CollectiveKind::kAllReduce, context, *request, response);
}

grpc::Status WorkerService::Broadcast(grpc::ServerContext* context,
                                      const v1::CollectiveRequest* request,
                                      v1::CollectiveResponse* response) {
  return RunCollective(CollectiveKind::kBroadcast, context, *request, response);
}

grpc::Status WorkerService::AllGather(grpc::ServerContext* context,
                                      const v1::CollectiveRequest* request,
                                      v1::CollectiveResponse* response) {
  return RunCollective(CollectiveKind::kAllGather, context, *request, response);
}

grpc::Status WorkerService::Barrier(grpc::ServerContext* context,
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
