#include "daemon/worker/worker_service.h"

#include "core/outcome.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <system_error>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "wire/attach_token.h"
#include "wire/client_name.h"
#include "wire/registered_buffer_key.h"
#include "wire/grpc_status.h"
#include "daemon/logging/sanitized_text.h"
#include "daemon/logging/string_view_formatter.h"
#include "wire/reaction_order.h"
#include "spdlog/spdlog.h"
#include "wire/protocol_version.h"

namespace ringsync {
namespace {

// How often the Attach stream looks whether its client is still there.
constexpr absl::Duration kClientPoll = absl::Milliseconds(20);
// How long a second Attach waits for the first client's departure to be noticed.
constexpr absl::Duration kReattachGrace = absl::Seconds(3);
// How many reused shared files of one client the worker remembers for its clean-up (the
// SDK keeps a few; the rest are found by their pid prefix where the pid is visible).
constexpr size_t kMaxKeptFiles = 4096;

// The attach token a request carries, or "".
absl::string_view TokenOf(const grpc::ServerContextBase& context) {
  const auto& metadata = context.client_metadata();
  auto it = metadata.find(kAttachTokenMetadata);
  if (it == metadata.end()) return {};
  return absl::string_view(it->second.data(), it->second.size());
}

// The tensor bytes a request brings, for the queue's bounds.
uint64_t RequestBytes(const v1::CollectiveRequest& request) {
  if (request.has_shared()) return request.shared().size_bytes();
  return request.inline_data().size();
}

std::string DescribePeer(const std::optional<PeerCredentials>& local, absl::string_view peer) {
  if (!local.has_value()) return absl::StrCat("over TCP from ", peer);
  return absl::StrCat("on the unix socket, pid ", local->pid, " uid ", local->uid);
}

// See worker.proto: the trailers that mark a status as the worker's own verdict on the
// collective, with its outcome mark.
void AddVerdictTrailers(const absl::Status& status,
                        const std::function<void(std::string, std::string)>& add) {
  add("ringsync-status-origin", "worker");
  if (OutcomeMark mark = OutcomeMarkOf(status); mark != OutcomeMark::kNone) {
    add(std::string(kOutcomeMetadataKey), std::string(OutcomeMarkName(mark)));
  }
}

grpc::Status FromThisWorker(grpc::ServerContextBase* context, const absl::Status& status) {
  AddVerdictTrailers(status, [context](std::string key, std::string value) {
    context->AddTrailingMetadata(key, value);
  });
  return ToGrpc(status);
}

// Why a collective whose client went is aborted on every rank (an RPC's OnCancel, a call
// channel closed under its calls).
absl::Status ClientLeftDuringCollective(absl::string_view worker_id) {
  return absl::AbortedError(absl::StrCat("the training process attached to worker ", worker_id,
                                         " disconnected during the collective"));
}

// A failure as the worker's own verdict, as FromThisWorker marks it, for the call channel.
v1::CallAnswer VerdictAnswer(const absl::Status& status) {
  v1::CallAnswer answer;
  AddVerdictTrailers(status, [&answer](std::string key, std::string value) {
    (*answer.mutable_trailers())[key] = value;
  });
  answer.set_code(static_cast<int>(status.code()));
  answer.set_message(std::string(status.message()));
  return answer;
}

// A finished job's answer, as the RPC and the call channel give it: the response, or the
// failure with the trailers that say what the client's buffer holds and which membership
// its next collectives are for.
v1::CallAnswer AnswerOf(const CollectiveJob& job) {
  if (!job.status.ok()) {
    v1::CallAnswer answer = VerdictAnswer(job.status);
    auto& trailers = *answer.mutable_trailers();
    if (job.is_registered()) {
      // What the client's registered buffer holds now (ringsync/registered_buffer.h).
      trailers[std::string(kRegisteredBufferMetadataKey)] =
          job.touched_caller_memory ? "unspecified" : "untouched";
    }
    if (OutcomeMarkOf(job.status) == OutcomeMark::kMembershipChanged) {
      // The membership the client's next collectives are for (worker.proto).
      trailers[std::string(kMembershipMetadataKey)] = absl::StrCat(job.membership_now);
    }
    return answer;
  }
  v1::CallAnswer answer;
  v1::CollectiveResponse* response = answer.mutable_response();
  response->set_generation(job.generation);
  response->set_sequence(job.spec.sequence);
  response->set_bytes_sent(job.stats.bytes_sent);
  response->set_bytes_received(job.stats.bytes_received);
  response->set_seconds(absl::ToDoubleSeconds(job.elapsed));
  const absl::Span<const std::byte> result = job.Result();
  if (!job.is_shared && !job.inline_data.empty()) {
    response->set_inline_data(result.data(), result.size());
  } else {
    response->set_result_offset(job.result_offset);
  }
  response->set_result_bytes(job.result_bytes.value_or(0));
  return answer;
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
    HandToGrpc(this);  // gRPC orders this before OnCancel and OnDone; TSan cannot see how
  }

  void OnCancel() override {
    InReaction(this);
    job_->client_gone.Cancel(ClientLeftDuringCollective(worker_id_));
    HandToGrpc(this);
  }
  void OnDone() override {
    InReaction(this);
    delete this;
  }

 private:
  // Called once, by the executor, when the job has its result.
  void Answer() {
    v1::CallAnswer answer = AnswerOf(*job_);
    if (answer.code() != 0) {
      for (const auto& [key, value] : answer.trailers()) context_->AddTrailingMetadata(key, value);
      HandToGrpc(this);  // Finish lets gRPC run OnDone
      Finish(grpc::Status(static_cast<grpc::StatusCode>(answer.code()), answer.message()));
      return;
    }
    response_->Swap(answer.mutable_response());
    HandToGrpc(this);
    Finish(grpc::Status::OK);
  }

  grpc::CallbackServerContext* const context_;
  v1::CollectiveResponse* const response_;
  const std::shared_ptr<CollectiveJob> job_;
  const std::string worker_id_;
};

}  // namespace

WorkerService::WorkerService(WorkerServiceOptions options, RingManager& ring,
                             CollectiveExecutor& executor, const LocalPeers* peers,
                             metrics::Refusals* refusals)
    : options_(std::move(options)),
      limits_{.shm_dir = options_.shm_dir,
              .default_timeout = options_.default_timeout,
              .max_timeout = kMaxRequestTimeout,
              // LimitsFor grants these to a client attached on the unix socket.
              .shared_owner = std::nullopt,
              .registered = nullptr,
              .max_inline_bytes = options_.max_inline_bytes > 0 ? options_.max_inline_bytes
                                                                : uint64_t{64} << 20},
      ring_(ring),
      executor_(executor),
      peers_(peers),
      refusals_(refusals),
      registered_(options_.registered_buffers) {}

void WorkerService::Refuse(absl::string_view reason, absl::string_view detail) {
  if (refusals_ != nullptr) refusals_->Refuse(reason, detail);
}

absl::StatusOr<AttachedClient> WorkerService::CheckCaller(grpc::ServerContextBase& context,
                                                          absl::string_view what) {
  absl::StatusOr<AttachedClient> client = gate_.Check(TokenOf(context));
  if (!client.ok()) {
    Refuse("client_not_attached", absl::StrCat(what, " from ", context.peer(), ": ",
                                               client.status().message()));
    return absl::PermissionDeniedError(absl::StrCat("worker ", options_.worker_id, " refused ",
                                                    what, ": ", client.status().message()));
  }
  return client;
}

JobRequestLimits WorkerService::LimitsFor(const AttachedClient& client,
                                          const grpc::ServerContextBase& context) const {
  JobRequestLimits limits = limits_;
  const bool on_socket = peers_ != nullptr && peers_->Find(context.peer()).has_value();
  if (on_socket && client.local.has_value()) {
    limits.shared_owner = client.local;
    limits.registered = &registered_;
  }
  return limits;
}

void WorkerService::FillInfo(const RingStatus& status, v1::WorkerInfo* info) const {
  info->set_worker_id(options_.worker_id);
  info->set_rank(status.rank);
  info->set_world_size(status.world_size);
  info->set_generation(status.generation);
  info->set_membership(status.membership);
  info->set_ready(status.ready);
  info->set_reduce_device(options_.reduce_device);
  info->set_protocol_version(kProtocolVersion);
  info->set_max_inline_bytes(options_.max_inline_bytes);
  info->set_takes_arriving_input(true);
  info->set_gathers_in_registered(true);
  info->set_takes_broadcast_without_input(true);
  info->set_takes_arriving_reduce_scatter_input(true);
  info->set_uneven_all_to_all(true);
  info->set_descriptor_socket(descriptors_ != nullptr);
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
  // Nothing of the request is used before the caller is known to be the attached client.
  absl::StatusOr<AttachedClient> client =
      CheckCaller(*context, absl::StrCat(CollectiveKindName(kind), " request"));
  absl::StatusOr<std::shared_ptr<CollectiveJob>> job =
      client.ok() ? TakeIn(kind, request, LimitsFor(*client, *context)) : client.status();
  if (!job.ok()) {  // no turn on the ring is taken: only this RPC fails
    grpc::ServerUnaryReactor* refused = context->DefaultReactor();
    refused->Finish(FromThisWorker(context, job.status()));
    return refused;
  }
  // Owned by gRPC from here until its OnDone; the job may finish it before this returns
  // (the executor refuses it at once), which the callback API allows.
  auto* reactor = new CollectiveReactor(context, response, *job, options_.worker_id);
  SubmitJob(*std::move(job));
  return reactor;
}

void WorkerService::SubmitJob(std::shared_ptr<CollectiveJob> job, bool run_here_if_idle) {
  const absl::Status queued = run_here_if_idle ? executor_.SubmitAndRunIfIdle(std::move(job))
                                               : executor_.Submit(std::move(job));
  if (absl::IsResourceExhausted(queued)) {
    Refuse("client_queue_full", queued.message());
  }
}

absl::StatusOr<std::shared_ptr<CollectiveJob>> WorkerService::TakeIn(
    CollectiveKind kind, const v1::CollectiveRequest& request, const JobRequestLimits& limits) {
  // Checked before a file is opened; Submit checks again, under the queue's lock.
  if (absl::Status room = executor_.CheckRoom(RequestBytes(request)); !room.ok()) {
    Refuse("client_queue_full", room.message());
    return room;
  }
  absl::StatusOr<std::shared_ptr<CollectiveJob>> made = JobFromRequest(kind, request, limits);
  std::shared_ptr<CollectiveJob> job;
  if (made.ok()) {
    job = *std::move(made);
    if (job->is_shared && request.shared().reuse()) {
      absl::MutexLock lock(&kept_mu_);
      if (kept_files_.size() < kMaxKeptFiles) kept_files_.insert(request.shared().path());
    }
  } else {
    if (request.refused_by_client().empty()) {
      Refuse("client_request_invalid", made.status().message());
    }
    // The refusal takes the request's turn on the ring, failing it on every rank at once.
    const absl::Status why(made.status().code(),
                           absl::StrCat("worker ", options_.worker_id,
                                        " refused its client's request: ", made.status().message()));
    job = RefusedJob(kind, request, why, limits);
    if (job == nullptr) return made.status();  // no turn to take: only this call fails
  }
  return job;
}

void WorkerService::SubmitFromChannel(CollectiveKind kind, const v1::CollectiveRequest& request,
                                      const JobRequestLimits& limits,
                                      const ClientCallChannel::Answer& answer) {
  absl::StatusOr<std::shared_ptr<CollectiveJob>> job = TakeIn(kind, request, limits);
  if (!job.ok()) {
    answer(VerdictAnswer(job.status()));
    return;
  }
  // The executor finishes every job it is given, also when the client detaches.
  (*job)->on_done = [answer, done = std::weak_ptr<CollectiveJob>(*job)] {
    if (std::shared_ptr<CollectiveJob> finished = done.lock()) answer(AnswerOf(*finished));
  };
  std::optional<absl::Status> closing;
  {
    absl::MutexLock lock(&channel_mu_);
    std::erase_if(channel_jobs_, [](const std::weak_ptr<CollectiveJob>& j) { return j.expired(); });
    channel_jobs_.push_back(*job);
    closing = channel_closing_;
  }
  // Taken in while the channel closes: its client is gone, so the job fails at once on
  // every rank rather than running here while the close waits for this thread.
  if (closing.has_value()) (*job)->client_gone.Cancel(*closing);
  SubmitJob(*std::move(job), /*run_here_if_idle=*/true);
}

grpc::Status WorkerService::OpenCallChannel(grpc::ServerContext* context,
                                            const v1::OpenCallChannelRequest* request,
                                            v1::OpenCallChannelResponse*) {
  absl::StatusOr<AttachedClient> client = CheckCaller(*context, "an OpenCallChannel request");
  if (!client.ok()) return FromThisWorker(context, client.status());
  const JobRequestLimits limits = LimitsFor(*client, *context);
  auto refuse = [&](absl::Status why) {
    Refuse("call_channel_refused", why.message());
    return FromThisWorker(context, absl::Status(why.code(), absl::StrCat("worker ",
                                                                         options_.worker_id, ": ",
                                                                         why.message())));
  };
  if (limits.registered == nullptr) {
    return refuse(absl::FailedPreconditionError(
        "the call channel is for a training process on the worker's unix socket"));
  }
  const uint64_t capacity = request->mailbox_capacity();
  if (absl::Status s = FrameMailboxLayout::CheckCapacity(capacity); !s.ok()) return refuse(s);
  absl::StatusOr<RegisteredBuffers::Slice> buffer =
      registered_.Find(request->buffer_id(), 0, CallChannelLayout::BufferBytes(capacity));
  if (!buffer.ok()) return refuse(buffer.status());
  auto channel = std::make_unique<ClientCallChannel>(
      buffer->mapping, buffer->bytes, capacity,
      [this, limits](CollectiveKind kind, const v1::CollectiveRequest& call,
                     const ClientCallChannel::Answer& answer) {
        SubmitFromChannel(kind, call, limits, answer);
      },
      [this, token = client->token](const absl::Status& why) {
        // The client's own memory holds what no client writes: its calls through the
        // channel can no longer be answered in order; detach it so that it hears of it.
        Refuse("call_channel_broken", why.message());
        spdlog::error("the call channel of the attached training process broke ({}); "
                      "detaching it", std::string(why.message()));
        gate_.Close(token);
      },
      options_.shm_spin);
  std::unique_ptr<ClientCallChannel> previous;
  {
    absl::MutexLock lock(&channel_mu_);
    previous = std::exchange(channel_, std::move(channel));
  }
  spdlog::info("the attached training process sends its collectives through a call channel "
               "(shared memory, {} bytes per mailbox)", capacity);
  return grpc::Status::OK;  // `previous` (a client that opened twice) stops here
}

void WorkerService::CloseCallChannel(const absl::Status& why) {
  std::unique_ptr<ClientCallChannel> channel;
  std::vector<std::weak_ptr<CollectiveJob>> jobs;
  {
    absl::MutexLock lock(&channel_mu_);
    channel = std::move(channel_);
    jobs.swap(channel_jobs_);
    channel_closing_ = why;  // what the channel's thread takes in from now on: SubmitFromChannel
  }
  // As a disconnected RPC's OnCancel does: a collective the client can no longer hear of
  // is aborted on every rank now, not left to its deadline. Before the channel's thread
  // is stopped: it may be running one of them.
  for (const std::weak_ptr<CollectiveJob>& weak : jobs) {
    if (std::shared_ptr<CollectiveJob> job = weak.lock()) job->client_gone.Cancel(why);
  }
  channel.reset();  // no request is taken in after this
  absl::MutexLock lock(&channel_mu_);
  channel_closing_.reset();
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

grpc::ServerUnaryReactor* WorkerService::ReduceScatter(grpc::CallbackServerContext* context,
                                                       const v1::CollectiveRequest* request,
                                                       v1::CollectiveResponse* response) {
  return RunCollective(CollectiveKind::kReduceScatter, context, *request, response);
}

grpc::ServerUnaryReactor* WorkerService::Scatter(grpc::CallbackServerContext* context,
                                                 const v1::CollectiveRequest* request,
                                                 v1::CollectiveResponse* response) {
  return RunCollective(CollectiveKind::kScatter, context, *request, response);
}

grpc::ServerUnaryReactor* WorkerService::Gather(grpc::CallbackServerContext* context,
                                                const v1::CollectiveRequest* request,
                                                v1::CollectiveResponse* response) {
  return RunCollective(CollectiveKind::kGather, context, *request, response);
}

grpc::ServerUnaryReactor* WorkerService::AllToAll(grpc::CallbackServerContext* context,
                                                  const v1::CollectiveRequest* request,
                                                  v1::CollectiveResponse* response) {
  return RunCollective(CollectiveKind::kAllToAll, context, *request, response);
}

grpc::Status WorkerService::Attach(grpc::ServerContext* context, const v1::AttachRequest* request,
                                   grpc::ServerWriter<v1::WorkerEvent>* writer) {
  // Who is at the other end, from the kernel (SO_PEERCRED), not from the request.
  const std::optional<PeerCredentials> local =
      peers_ != nullptr ? peers_->Find(context->peer()) : std::nullopt;
  // The client's own name for itself, as logs and the other ranks' messages show it: one
  // line, bounded (the SDK sends no more; another client may send anything).
  const std::string client_name = SanitizeText(request->client_name(), kMaxClientNameBytes);
  // A restarted training process may reconnect before the worker has noticed that its
  // previous incarnation is gone: give that a moment before refusing.
  const SteadyDeadline give_up(kReattachGrace);
  bool attached = executor_.Attach();
  while (!attached && !give_up.Passed() && !context->IsCancelled()) {
    absl::SleepFor(kClientPoll);
    attached = executor_.Attach();
  }
  if (!attached) {
    Refuse("client_attach_busy", absl::StrCat(client_name, " ",
                                              DescribePeer(local, context->peer())));
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        absl::StrCat("another training process is attached to worker ",
                                     options_.worker_id,
                                     "; each worker serves exactly one training process"));
  }
  absl::StatusOr<std::string> opened = gate_.Open(local);
  if (!opened.ok()) {
    spdlog::error("could not attach {}: {}", client_name, opened.status().message());
    executor_.Detach(opened.status());
    return grpc::Status(grpc::StatusCode::INTERNAL,
                        absl::StrCat("worker ", options_.worker_id,
                                     " could not make an attach token: ", opened.status().message()));
  }
  const std::string token = *std::move(opened);
  spdlog::info("training process attached: {} ({})", client_name,
               DescribePeer(local, context->peer()));
  uint64_t seen = 0;
  bool first = true;
  // The gate closes under the client when its call channel broke (OpenCallChannel).
  while (!context->IsCancelled() && !stopping_ && gate_.Check(token).ok()) {
    const RingStatus status = ring_.AwaitChange(seen, kClientPoll);
    if (status.version == seen && !first) continue;
    seen = status.version;
    v1::WorkerEvent event;
    FillInfo(status, event.mutable_info());
    if (first) event.set_attach_token(token);  // this client's alone: see ClientGate
    first = false;
    if (!writer->Write(event)) break;
  }
  const std::string why =
      stopping_ ? "the worker is shutting down"
      : !gate_.Check(token).ok()
          ? absl::StrCat("the call channel of the training process attached to worker ",
                         options_.worker_id, " (", client_name,
                         ") held what no client writes; it was detached")
          : absl::StrCat("the training process attached to worker ", options_.worker_id, " (",
                         client_name, ") disconnected");
  spdlog::info("{}", why);
  gate_.Close(token);
  // Before the detach: no request from the channel is taken in after it.
  CloseCallChannel(ClientLeftDuringCollective(options_.worker_id));
  // Before the detach too: once the executor is free the same process may attach again,
  // and its new client's files carry the same pid (ringsync-<pid>-) as this one's.
  registered_.Clear();  // running collectives keep their mappings until they end
  RemoveClientFiles(local);
  executor_.Detach(absl::AbortedError(why));
  return grpc::Status::OK;
}

grpc::Status WorkerService::Detach(grpc::ServerContext* context, const v1::DetachRequest*,
                                   v1::DetachResponse*) {
  // Only the attached client may say it is done: from anyone else the goodbye would make
  // the ring wait for a new client instead of failing at once when this one vanishes.
  if (absl::StatusOr<AttachedClient> client = CheckCaller(*context, "a Detach request");
      !client.ok()) {
    return FromThisWorker(context, client.status());
  }
  executor_.ExpectCleanDetach();
  return grpc::Status::OK;
}

grpc::Status WorkerService::RegisterBuffer(grpc::ServerContext* context,
                                           const v1::RegisterBufferRequest* request,
                                           v1::RegisterBufferResponse* response) {
  absl::StatusOr<AttachedClient> client = CheckCaller(*context, "a RegisterBuffer request");
  if (!client.ok()) return FromThisWorker(context, client.status());
  const JobRequestLimits limits = LimitsFor(*client, *context);
  if (limits.registered == nullptr || !limits.shared_owner.has_value()) {
    return FromThisWorker(context, absl::FailedPreconditionError(absl::StrCat(
        "worker ", options_.worker_id, ": registered buffers are for a training process on "
        "the worker's unix socket")));
  }
  absl::StatusOr<uint64_t> id = RegisterOf(*request, *limits.shared_owner);
  if (!id.ok()) {
    Refuse("registered_buffer_refused", id.status().message());
    return FromThisWorker(context, absl::Status(id.status().code(),
                                                absl::StrCat("worker ", options_.worker_id, ": ",
                                                             id.status().message())));
  }
  response->set_buffer_id(*id);
  return grpc::Status::OK;
}

absl::StatusOr<uint64_t> WorkerService::RegisterOf(const v1::RegisterBufferRequest& request,
                                                   const PeerCredentials& client) {
  if (request.descriptor_nonce().empty()) {
    return registered_.Register(client.pid, client.uid, request.fd(), request.size_bytes());
  }
  if (descriptors_ == nullptr) {
    return absl::FailedPreconditionError("this worker has no descriptor socket");
  }
  absl::StatusOr<UniqueFd> fd = descriptors_->Take(request.descriptor_nonce());
  if (!fd.ok()) return absl::InvalidArgumentError(fd.status().message());
  return registered_.RegisterDescriptor(client.uid, *fd, request.size_bytes());
}

grpc::Status WorkerService::ReleaseBuffer(grpc::ServerContext* context,
                                          const v1::ReleaseBufferRequest* request,
                                          v1::ReleaseBufferResponse*) {
  absl::StatusOr<AttachedClient> client = CheckCaller(*context, "a ReleaseBuffer request");
  if (!client.ok()) return FromThisWorker(context, client.status());
  return FromThisWorker(context, registered_.Release(request->buffer_id()));
}

void WorkerService::RemoveClientFiles(const std::optional<PeerCredentials>& client) {
  std::set<std::string> kept;
  {
    absl::MutexLock lock(&kept_mu_);
    kept.swap(kept_files_);
  }
  if (!client.has_value()) return;  // over TCP: it named no files
  auto remove_if_theirs = [&](const std::string& path) {
    struct stat info {};
    if (::lstat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode) && info.st_uid == client->uid) {
      ::unlink(path.c_str());  // collectives still finishing hold descriptors: only names go
    }
  };
  for (const std::string& path : kept) remove_if_theirs(path);
  if (client->pid <= 0) return;  // its pid is not visible here (another pid namespace)
  const std::string prefix = absl::StrCat(SharedTensor::kNamePrefix, client->pid, "-");
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(options_.shm_dir, error)) {
    if (absl::StartsWith(entry.path().filename().string(), prefix)) remove_if_theirs(entry.path());
  }
}

}  // namespace ringsync
