#include "client/src/client_core.h"

#include <unistd.h>

#include <algorithm>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "client/src/worker_status.h"
#include "core/collective.h"  // kMaxCollectiveNameBytes
#include "core/utf8.h"
#include "wire/call_channel_layout.h"
#include "wire/client_name.h"
#include "wire/attach_token.h"
#include "wire/descriptor_socket.h"
#include "wire/registered_buffer_key.h"
#include "client/src/descriptor_handover.h"
#include "client/src/registered_buffer_state.h"
#include "client/src/registered_memory.h"
#include "daemon/shm/arrival_marks.h"
#include "absl/strings/cord.h"
#include "wire/reaction_order.h"
#include "wire/grpc_options.h"
#include "wire/security/transport_security.h"
#include "grpc/grpc.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "spdlog/spdlog.h"

namespace ringsync::internal {
namespace {

// How long a closing Client waits for its worker to take its goodbye.
constexpr absl::Duration kGoodbyeTimeout = absl::Seconds(1);

// gRPC shuts its core down when its last user goes away, and that shutdown waits up to
// 10 s for sockets still closing. A training process that drops its only Client after
// losing its worker, and connects a new one, paid it in full (measured: closing took
// 9,994 ms while the restarted worker came up). So the SDK takes one reference to the
// gRPC library for the life of the process, once, and never gives it back: no Client's
// end is ever gRPC's end. (A count, not a mutable object: nothing else reads it.)
void KeepGrpcInitializedForTheProcess() {
  static const bool initialized = [] {
    grpc_init();
    return true;
  }();
  (void)initialized;
}
// How long registering a buffer may take (the worker maps it: quick).
constexpr absl::Duration kRegisterTimeout = absl::Seconds(10);
// How long a call waits for room in the call channel (the worker takes requests at once)
// before its RPC carries it instead.
constexpr absl::Duration kChannelSendTimeout = absl::Seconds(1);

std::string DescribeInfo(const v1::WorkerInfo& info) {
  return absl::StrCat("worker '", info.worker_id(), "', rank ", info.rank(), ", world size ",
                      info.world_size(), ", generation ", info.generation(),
                      info.ready() ? ", ready" : ", not ready");
}

}  // namespace

ClientCore::ClientCore(WorkerTarget target, const ClientOptions& options,
                       std::shared_ptr<grpc::Channel> channel)
    : target_(std::move(target)),
      options_(options),
      shared_memory_(std::make_shared<SharedMemoryPool>(options.shared_memory_dir)),
      channel_(std::move(channel)),
      stub_(v1::Worker::NewStub(channel_)),
      registered_(std::make_shared<RegisteredBufferRegistry>(
          [this](uint64_t id) { ReleaseRegistered(id); })) {
  if (options.stage_in_registered_memory && target_.is_unix()) {
    staging_ = std::make_shared<StagingBuffers>(
        [this](size_t size_bytes) { return RegisterMemory(size_bytes); });
  }
  if (options.fusion.enabled) {
    fusion_ = std::make_unique<FusionQueue>(
        options.fusion, [this](CollectiveCall call,
                               std::function<void(const absl::Status&)> on_complete) {
          StartNow(std::move(call), std::move(on_complete));
        });
  }
}

absl::StatusOr<std::unique_ptr<ClientCore>> ClientCore::Connect(absl::string_view target,
                                                                const ClientOptions& options) {
  absl::StatusOr<WorkerTarget> parsed = ParseWorkerTarget(target);
  if (!parsed.ok()) return parsed.status();
  if (options.connect_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat("ClientOptions::connect_timeout is ",
                                                   absl::FormatDuration(options.connect_timeout),
                                                   "; it must be positive"));
  }
  // The worker logs it and quotes it to the other ranks: text, and short.
  static_assert(ClientOptions::kMaxClientNameBytes == kMaxClientNameBytes,
                "the SDK's bound on a client's name is the one the worker keeps");
  const bool name_is_text = IsValidUtf8(options.client_name);
  if (options.client_name.size() > kMaxClientNameBytes || !name_is_text) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ClientOptions::client_name must be UTF-8 text of at most ", kMaxClientNameBytes,
        " bytes; it has ", options.client_name.size(), name_is_text ? "" : " and is not text"));
  }
  const SteadyDeadline deadline(options.connect_timeout);
  KeepGrpcInitializedForTheProcess();
  TransportSecurityOptions security_options;
  security_options.tls_ca = options.tls_ca;
  security_options.tls_cert = options.tls_cert;
  security_options.tls_key = options.tls_key;
  security_options.token_file = options.token_file;
  security_options.name_prefix = "ClientOptions::";
  absl::StatusOr<TransportSecurity> security = TransportSecurity::Create(security_options);
  if (!security.ok()) return security.status();
  std::shared_ptr<grpc::Channel> channel =
      security->CreateChannel(parsed->grpc_target, ControlChannelArguments());
  std::unique_ptr<ClientCore> core(new ClientCore(*std::move(parsed), options, std::move(channel)));
  if (!core->channel_->WaitForConnected(absl::ToChronoTime(absl::Now() + deadline.Left()))) {
    return absl::UnavailableError(absl::StrCat(
        "could not reach the ringsync worker at ", core->target_.grpc_target, " within ",
        absl::FormatDuration(options.connect_timeout), ": is ", core->target_.WorkerHint(), "?",
        security->tls() ? " (or the TLS handshake failed: the worker's certificate and "
                          "ClientOptions::tls_cert must come from the CA in tls_ca)"
                        : ""));
  }
  core->attach_thread_ = std::thread(&ClientCore::ReadEvents, core.get());
  if (absl::Status ready = core->AwaitReady(deadline, options.connect_timeout,
                                                  "ClientOptions::connect_timeout"); !ready.ok()) return ready;
  if (options.call_channel && core->target_.is_unix()) core->OpenCallChannel();
  return core;
}

ClientCore::~ClientCore() {
  registered_->Close();
  if (fusion_ != nullptr) fusion_->Close();  // then its batch in flight is cancelled below
  {
    absl::MutexLock lock(&mu_);
    closing_ = true;
  }
  // Calls in the channel have no RPC to cancel: they end here, as cancelled RPCs do (the
  // worker hears of it when this client detaches below, and aborts them on the ring).
  call_channel_.reset();
  FailChannelCalls(grpc::Status(grpc::StatusCode::CANCELLED, "the Client was destroyed"));
  {
    absl::MutexLock lock(&mu_);
    for (const std::shared_ptr<PendingCollective>& pending : in_flight_) {
      pending->context()->TryCancel();
    }
    mu_.Await(absl::Condition(this, &ClientCore::NothingInFlight));
  }
  SayGoodbye();
  attach_context_.TryCancel();
  if (attach_thread_.joinable()) attach_thread_.join();
}

void ClientCore::ReadEvents() {
  v1::AttachRequest request;
  request.set_client_name(options_.client_name.empty() ? absl::StrCat("pid ", getpid())
                                                       : options_.client_name);
  request.set_client_pid(getpid());
  std::unique_ptr<grpc::ClientReader<v1::WorkerEvent>> reader =
      stub_->Attach(&attach_context_, request);
  v1::WorkerEvent event;
  while (reader->Read(&event)) {
    absl::MutexLock lock(&mu_);
    info_ = event.info();
    has_info_ = true;
    if (!event.attach_token().empty()) {  // the first event
      attach_token_ = event.attach_token();
      membership_ = event.info().membership();
    }
  }
  const grpc::Status status = reader->Finish();
  {
    absl::MutexLock lock(&mu_);
    detached_ = status.ok() ? absl::UnavailableError("the worker closed the attach stream")
                            : FromWorkerStatus(status, target_);
  }
  // Calls in the channel will not be answered: they fail as their RPCs would have when
  // the worker went (or detached this client).
  FailChannelCalls(grpc::Status(
      grpc::StatusCode::UNAVAILABLE,
      status.ok() ? "the worker closed the attach stream" : status.error_message()));
}

bool ClientCore::ReadyLocked() const {
  return !detached_.has_value() && info_.ready() && info_.rank() >= 0;
}

bool ClientCore::ReadyOrDetached() const { return detached_.has_value() || ReadyLocked(); }

bool ClientCore::NothingInFlight() const { return in_flight_.empty(); }

absl::Status ClientCore::AwaitReady(SteadyDeadline deadline, absl::Duration wait,
                                    absl::string_view knob) {
  absl::MutexLock lock(&mu_);
  // What it ended on is read below.
  AwaitWithLimit(mu_, absl::Condition(this, &ClientCore::ReadyOrDetached), WaitLimit{deadline}, "")
      .IgnoreError();
  if (detached_.has_value()) {
    const absl::Status& why = *detached_;
    if (absl::IsFailedPrecondition(why)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "the ringsync worker at ", target_.grpc_target, " refused this client: ", why.message(),
          " (a worker serves one training process at a time: give each process its own worker)"));
    }
    return absl::Status(why.code(), absl::StrCat("the ringsync worker at ", target_.grpc_target,
                                                 " ended the attach stream: ", why.message()));
  }
  if (!ReadyLocked()) {
    return absl::DeadlineExceededError(absl::StrCat(
        "the ringsync worker at ", target_.grpc_target,
        " answered, but reported no formed ring within ",
        absl::FormatDuration(wait),
        " (last report: ", has_info_ ? DescribeInfo(info_) : "none",
        "); are all workers of the ring running and "
        "registered with the same coordinator? (", knob, " sets the wait)"));
  }
  return absl::OkStatus();
}

v1::WorkerInfo ClientCore::info() const {
  absl::MutexLock lock(&mu_);
  return info_;
}

bool ClientCore::attached() const {
  absl::MutexLock lock(&mu_);
  return !detached_.has_value();
}

bool ClientCore::ready() const {
  absl::MutexLock lock(&mu_);
  return ReadyLocked();
}

CollectiveHandle ClientCore::Start(CollectiveCall call) {
  if (fusion_ != nullptr) return fusion_->Submit(std::move(call));
  return PendingCollective::MakeHandle(StartNow(std::move(call), nullptr));
}

std::shared_ptr<PendingCollective> ClientCore::StartNow(
    CollectiveCall call, std::function<void(const absl::Status&)> on_complete) {
  // A failure before the RPC still tells whoever waits for this call's completion.
  auto completed = [&on_complete](absl::Status status) {
    if (on_complete) on_complete(status);
    return PendingCollective::CompletedState(std::move(status));
  };
  if (!call.refusal.ok()) {
    absl::Status why = call.refusal;
    TellRingOfRefusal(std::move(call), why);
    return completed(std::move(why));
  }
  v1::WorkerInfo worker;  // as the worker last said: its ring place and what it takes
  {
    absl::MutexLock lock(&mu_);
    if (detached_.has_value()) {
      return completed(absl::FailedPreconditionError(absl::StrCat(
          DescribeCall(call), ": this client is no longer attached to the ringsync worker at ",
          target_.grpc_target, " (", detached_->message(),
          "); the worker has dropped this client's collectives: connect a new Client")));
    }
    worker = info_;
  }
  const int rank = worker.rank();
  const int world_size = worker.world_size();
  const uint64_t max_inline_bytes = worker.max_inline_bytes();
  absl::StatusOr<CallBytes> bytes = ValidateCall(call, world_size);
  if (!bytes.ok()) {
    if (absl::IsInvalidArgument(bytes.status())) TellRingOfRefusal(call, bytes.status());
    return completed(bytes.status());
  }
  if (bytes->side_by_side && !worker.uneven_all_to_all()) {
    const absl::Status refused = absl::InvalidArgumentError(absl::StrCat(
        DescribeCall(call), ": the worker is of an older ringsync, which has no all-to-all of "
        "uneven blocks; upgrade the workers"));
    TellRingOfRefusal(call, refused);
    return completed(refused);
  }
  // (A collective without data names none either way: PrepareData.) An uneven
  // all-to-all's result comes back inline too.
  const size_t inline_bytes = bytes->side_by_side ? std::max(bytes->input, bytes->output)
                                                  : bytes->input;
  const bool too_large_inline = max_inline_bytes > 0 && inline_bytes > max_inline_bytes;
  const bool use_shared_memory =
      target_.is_unix() && (bytes->buffer() >= options_.shared_memory_threshold_bytes ||
                            too_large_inline);
  if (too_large_inline && !use_shared_memory) {
    // The worker's gRPC would refuse it unread, and the other ranks would wait for it.
    const absl::Status refused = absl::InvalidArgumentError(absl::StrCat(
        DescribeCall(call), " carries ", inline_bytes, " bytes, more than the worker takes "
        "inline over TCP (its --max_inline_bytes=", max_inline_bytes, "); connect through "
        "the worker's unix socket (shared memory) or raise --max_inline_bytes"));
    TellRingOfRefusal(call, refused);
    return completed(refused);
  }
  const bool root_without_data =
      rank == call.spec.root &&
      ((call.spec.kind == CollectiveKind::kScatter && call.input == nullptr && bytes->input > 0) ||
       (call.spec.kind == CollectiveKind::kGather && call.output == nullptr && bytes->output > 0));
  if (root_without_data) {
    const absl::Status refused = absl::InvalidArgumentError(absl::StrCat(
        DescribeCall(call), ": this rank is the root, and its ",
        call.spec.kind == CollectiveKind::kScatter ? "input" : "output", " is null"));
    TellRingOfRefusal(call, refused);
    return completed(refused);
  }
  auto pending = std::make_shared<PendingCollective>(std::move(call), *bytes);
  pending->SetHooks(std::move(on_complete), nullptr);
  EncodeRequest(pending->call(), pending->request());
  const CollectiveSpec& spec = pending->call().spec;
  const bool takes_no_input =
      spec.kind == CollectiveKind::kScatter ||
      (spec.kind == CollectiveKind::kBroadcast && worker.takes_broadcast_without_input());
  if (takes_no_input && rank >= 0 && rank != spec.root) {
    // The root's bytes overwrite this rank's: no copy in (the worker checks the rank).
    pending->LeaveInputOut();
  }
  if (spec.kind == CollectiveKind::kGather && pending->call().output == nullptr) {
    // Nowhere to take a result: the worker must not run it as the root.
    pending->request()->set_output_left_out(true);
  }
  const bool staged_in_place = RunsInStaging(pending->call(), *bytes, worker.gathers_in_registered());
  if (std::optional<RegisteredBufferRegistry::Location> in =
          InRegisteredBuffer(pending->call(), *bytes, worker);
      in.has_value() && target_.is_unix()) {
    pending->UseRegistered(in->id, in->offset);
  } else if (const bool arriving = ArrivesWhileRunning(pending->call(), worker);
             std::shared_ptr<RegisteredMemory> staged =
                 use_shared_memory && staged_in_place ? Stage(*bytes, arriving) : nullptr) {
    if (arriving) {
      // The request goes first and the copy follows it, so the ring starts on the first
      // blocks while the rest are still being copied (daemon/shm/arrival_marks.h).
      pending->UseStagingArriving(std::move(staged), staging_);
      StartRpc(pending);
      pending->CopyInArriving(rank, world_size);
      return pending;
    }
    pending->UseStaging(std::move(staged), staging_);
  } else if (std::optional<StagingArena::Slice> slice =
                 use_shared_memory || !staged_in_place ? std::nullopt : StageInArena(*bytes)) {
    pending->UseArenaSlice(*std::move(slice));
  } else {
    pending->PrepareData(use_shared_memory ? shared_memory_ : nullptr);
  }
  StartRpc(pending);
  return pending;
}

CollectiveHandle ClientCore::Refuse(CollectiveCall call, absl::Status why) {
  call.refusal = std::move(why);
  return Start(std::move(call));  // in turn, behind what the fusion queue holds
}

std::optional<RegisteredBufferRegistry::Location> ClientCore::InRegisteredBuffer(
    const CollectiveCall& call, const CallBytes& bytes, const v1::WorkerInfo& worker) const {
  // A fused call's tensors (pieces) are copied, each may lie anywhere.
  if (bytes.output == 0 || !call.pieces.empty()) return std::nullopt;
  switch (call.spec.kind) {
    case CollectiveKind::kAllToAll:
      if (bytes.side_by_side) {
        // Uneven: in place where the output follows the input in one registered buffer.
        if (static_cast<const char*>(call.output) !=
            static_cast<const char*>(call.input) + bytes.input) {
          return std::nullopt;
        }
        return registered_->Find(call.input, bytes.buffer());
      }
      [[fallthrough]];
    case CollectiveKind::kAllReduce:
    case CollectiveKind::kBroadcast:
      if (call.input != call.output) return std::nullopt;
      return registered_->Find(call.output, bytes.output);
    case CollectiveKind::kAllGather:
    case CollectiveKind::kGather:
      // In the output, whose first slot takes the input (PendingCollective::UseRegistered);
      // a gather's other ranks stage theirs, which the chain passes through, so their
      // output stays untouched.
      if (!worker.gathers_in_registered() ||
          (call.spec.kind == CollectiveKind::kGather && worker.rank() != call.spec.root)) {
        return std::nullopt;
      }
      return registered_->Find(call.output, bytes.output);
    case CollectiveKind::kReduceScatter:
    case CollectiveKind::kScatter: {
      // Only the in-place form (the output is the rank's own block of the input) says the
      // rest of the input may be overwritten; else it is the caller's, kept.
      const auto* input = static_cast<const char*>(call.input);
      if (worker.rank() < 0 || input == nullptr ||
          static_cast<const char*>(call.output) !=
              input + static_cast<uint64_t>(worker.rank()) * bytes.output) {
        return std::nullopt;
      }
      return registered_->Find(call.input, bytes.input);
    }
    case CollectiveKind::kBarrier: return std::nullopt;
  }
  return std::nullopt;
}

bool ClientCore::ArrivesWhileRunning(const CollectiveCall& call, const v1::WorkerInfo& worker) {
  // A fused call's pieces are gathered at once; other kinds read their input at once.
  if (!call.pieces.empty()) return false;
  switch (call.spec.kind) {
    case CollectiveKind::kAllReduce: return worker.takes_arriving_input();
    case CollectiveKind::kReduceScatter:
      return worker.takes_arriving_input() && worker.takes_arriving_reduce_scatter_input();
    case CollectiveKind::kBroadcast:
    case CollectiveKind::kAllGather:
    case CollectiveKind::kBarrier:
    case CollectiveKind::kScatter:
    case CollectiveKind::kGather:
    case CollectiveKind::kAllToAll: return false;
  }
  return false;
}

bool ClientCore::RunsInStaging(const CollectiveCall& call, const CallBytes& bytes,
                               bool gathers_in_registered) {
  if (bytes.output == 0) return false;
  switch (call.spec.kind) {
    case CollectiveKind::kAllReduce:
    case CollectiveKind::kBroadcast: return bytes.input == bytes.output;
    case CollectiveKind::kAllToAll: return bytes.side_by_side || bytes.input == bytes.output;
    case CollectiveKind::kAllGather:
    case CollectiveKind::kGather: return gathers_in_registered;
    case CollectiveKind::kReduceScatter:
    case CollectiveKind::kScatter: return true;  // its input is the range
    case CollectiveKind::kBarrier: return false;
  }
  return false;
}

std::shared_ptr<RegisteredMemory> ClientCore::Stage(const CallBytes& bytes, bool arriving) {
  if (staging_ == nullptr) return nullptr;
  absl::StatusOr<std::shared_ptr<RegisteredMemory>> buffer =
      staging_->Acquire(arriving ? ArrivalBufferBytes(bytes.input) : bytes.buffer());
  return buffer.ok() ? *std::move(buffer) : nullptr;  // a file then (staging_buffers.h)
}

std::optional<StagingArena::Slice> ClientCore::StageInArena(const CallBytes& bytes) {
  if (options_.staging_arena_bytes == 0 || !target_.is_unix()) return std::nullopt;
  std::shared_ptr<StagingArena> arena;
  {
    absl::MutexLock lock(&arena_mu_);
    if (arena_off_) return std::nullopt;
    if (arena_ == nullptr || arena_->retired()) {
      // The retired one lives on in its slices until their collectives are done.
      absl::StatusOr<std::shared_ptr<RegisteredMemory>> memory =
          RegisterMemory(options_.staging_arena_bytes);
      if (!memory.ok()) {
        arena_off_ = true;
        spdlog::debug("ringsync: small tensors travel inline: the worker did not take a staging "
                      "buffer of {} bytes ({})",
                      options_.staging_arena_bytes, memory.status().ToString());
        return std::nullopt;
      }
      arena_ = StagingArena::Create(*std::move(memory));
    }
    arena = arena_;
  }
  return arena->Take(bytes.buffer());
}

absl::StatusOr<RegisteredBuffer> ClientCore::Allocate(size_t size_bytes) {
  if (!target_.is_unix()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "registered buffers need the worker's unix socket; this client reaches ",
        target_.grpc_target, " over TCP (use plain spans, which are copied)"));
  }
  absl::StatusOr<std::shared_ptr<RegisteredMemory>> memory = RegisterMemory(size_bytes);
  if (!memory.ok()) return memory.status();
  return RegisteredBuffer(*std::move(memory));
}

size_t ClientCore::ReleaseIdleMemory() {
  size_t released = (staging_ != nullptr ? staging_->DropIdle() : 0) + shared_memory_->DropIdle();
  std::shared_ptr<StagingArena> idle_arena;
  {
    absl::MutexLock lock(&arena_mu_);
    // Callers copy arena_ only under this lock and their slices hold it: held here alone,
    // no collective is staged in it, nor about to be. The next small call makes a new one.
    if (arena_ != nullptr && arena_.use_count() == 1) idle_arena = std::move(arena_);
  }
  if (idle_arena != nullptr) released += idle_arena->capacity();
  return released;  // idle_arena is dropped (and the worker told) outside the lock
}

absl::StatusOr<std::shared_ptr<RegisteredMemory>> ClientCore::RegisterMemory(size_t size_bytes) {
  absl::StatusOr<std::shared_ptr<RegisteredMemory>> memory = RegisterMemoryOnce(size_bytes);
  // Idle staging buffers count against the worker's --max_registered_buffers: rather
  // than have a registration refused for them, they go (dropping tells the worker).
  if (absl::IsResourceExhausted(memory.status()) && staging_ != nullptr &&
      staging_->DropIdle() > 0) {
    memory = RegisterMemoryOnce(size_bytes);
  }
  return memory;
}

absl::StatusOr<std::shared_ptr<RegisteredMemory>> ClientCore::RegisterMemoryOnce(
    size_t size_bytes) {
  absl::StatusOr<std::shared_ptr<RegisteredMemory>> memory = RegisteredMemory::Create(size_bytes);
  if (!memory.ok()) return memory.status();
  v1::RegisterBufferRequest request;
  request.set_fd((*memory)->fd());
  request.set_size_bytes(size_bytes);
  bool descriptor_socket = false;
  {
    absl::MutexLock lock(&mu_);
    descriptor_socket = info_.descriptor_socket();
  }
  if (descriptor_socket) {
    // Over the worker's descriptor socket: it needs no pid the worker can see.
    absl::StatusOr<std::string> nonce = HandOverDescriptor(
        DescriptorSocketPath(target_.unix_socket_path), (*memory)->fd(), kRegisterTimeout);
    if (nonce.ok()) {
      request.set_descriptor_nonce(*std::move(nonce));
    } else {
      spdlog::debug("ringsync: {}; registering by descriptor number instead",
                    std::string(nonce.status().message()));
    }
  }
  grpc::ClientContext context;
  PrepareControlCall(context, kRegisterTimeout);
  v1::RegisterBufferResponse response;
  const grpc::Status status = stub_->RegisterBuffer(&context, request, &response);
  if (!status.ok()) {
    const absl::Status why = FromWorkerStatus(status, target_, ReportedByWorker(context));
    return absl::Status(why.code(), absl::StrCat("cannot register a buffer of ", size_bytes,
                                                 " bytes with the ringsync worker at ",
                                                 target_.grpc_target, ": ", why.message()));
  }
  (*memory)->SetRegistration(registered_, response.buffer_id());
  return memory;
}

void ClientCore::PrepareControlCall(grpc::ClientContext& context, absl::Duration timeout) {
  context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  absl::MutexLock lock(&mu_);
  context.AddMetadata(kAttachTokenMetadata, attach_token_);
}

void ClientCore::ReleaseRegistered(uint64_t id) {
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + kGoodbyeTimeout));
  {
    absl::MutexLock lock(&mu_);
    if (detached_.has_value()) return;  // the worker forgot this client's buffers
    context.AddMetadata(kAttachTokenMetadata, attach_token_);
  }
  v1::ReleaseBufferRequest request;
  request.set_buffer_id(id);
  v1::ReleaseBufferResponse response;
  // Best effort: a worker that is gone has forgotten the buffer with its client.
  stub_->ReleaseBuffer(&context, request, &response).ok();
}

void ClientCore::SayGoodbye() {
  grpc::ClientContext context;
  PrepareControlCall(context, kGoodbyeTimeout);
  v1::DetachResponse response;
  // Best effort: a worker that is gone, or of an older version, needs no goodbye.
  stub_->Detach(&context, v1::DetachRequest(), &response).ok();
}

void ClientCore::TellRingOfRefusal(CollectiveCall call, const absl::Status& why) {
  // A name that is not text (perhaps the refusal's cause) cannot travel in a request: the
  // ring is told with it escaped, as every rank that passed the same name escapes it. A byte
  // escapes to at most four ("\xff"), so the escaped name stays a valid name's length.
  const auto text = [](std::string& name) {
    constexpr size_t kMaxEscapedBytes = kMaxCollectiveNameBytes / 4;
    if (!IsValidUtf8(name)) {
      name = absl::CHexEscape(absl::string_view(name).substr(0, kMaxEscapedBytes));
    }
  };
  text(call.spec.name);
  for (FusedMember& member : call.spec.members) text(member.name);
  call.refusal = absl::OkStatus();
  call.pieces.clear();
  call.input = nullptr;
  call.output = nullptr;
  call.output_count = 0;
  auto pending = std::make_shared<PendingCollective>(std::move(call), CallBytes{});
  EncodeRequest(pending->call(), pending->request());
  pending->request()->set_refused_by_client(std::string(why.message()));
  StartRpc(pending);  // its outcome is the ring's; the caller has its answer already
}

void ClientCore::StartRpc(const std::shared_ptr<PendingCollective>& pending) {
  absl::MutexLock issue_lock(&issue_mu_);
  pending->request()->set_client_sequence(next_sequence_++);
  {
    absl::MutexLock lock(&mu_);
    in_flight_.insert(pending);
    // Without it the worker refuses the request: only its attached client may ask.
    pending->context()->AddMetadata(kAttachTokenMetadata, attach_token_);
    pending->request()->set_membership(membership_);
  }
  if (SendThroughChannel(pending)) return;
  // The token lives as long as gRPC keeps the callback; its destruction is the last
  // thing gRPC does with this collective's RPC on its thread.
  struct CallbackToken {
    CallbackToken(ClientCore* c, std::shared_ptr<PendingCollective> p)
        : core(c), pending(std::move(p)) {}
    CallbackToken(const CallbackToken&) = delete;
    CallbackToken& operator=(const CallbackToken&) = delete;
    ~CallbackToken() { core->Forget(std::move(pending)); }
    ClientCore* const core;
    std::shared_ptr<PendingCollective> pending;
  };
  auto token = std::make_shared<CallbackToken>(this, pending);
  HandToGrpc(token.get());  // gRPC runs `done` on its thread after this one starts the call
  auto done = [token = std::move(token)](const grpc::Status& status) {
    InReaction(token.get());
    token->core->OnRpcDone(*token->pending, status);
  };
  grpc::ClientContext* context = pending->context();
  const v1::CollectiveRequest* request = pending->request();
  v1::CollectiveResponse* response = pending->response();
  v1::Worker::Stub::async_interface* async = stub_->async();
  switch (pending->call().spec.kind) {
    case CollectiveKind::kAllReduce:
      async->AllReduce(context, request, response, std::move(done));
      break;
    case CollectiveKind::kBroadcast:
      async->Broadcast(context, request, response, std::move(done));
      break;
    case CollectiveKind::kAllGather:
      async->AllGather(context, request, response, std::move(done));
      break;
    case CollectiveKind::kBarrier:
      async->Barrier(context, request, response, std::move(done));
      break;
    case CollectiveKind::kReduceScatter:
      async->ReduceScatter(context, request, response, std::move(done));
      break;
    case CollectiveKind::kScatter:
      async->Scatter(context, request, response, std::move(done));
      break;
    case CollectiveKind::kGather:
      async->Gather(context, request, response, std::move(done));
      break;
    case CollectiveKind::kAllToAll:
      async->AllToAll(context, request, response, std::move(done));
      break;
  }
}

void ClientCore::OnRpcDone(PendingCollective& pending, const grpc::Status& status) {
  Conclude(pending, status, TrailersOf(*pending.context()));
}

void ClientCore::Conclude(PendingCollective& pending, const grpc::Status& status,
                          const Trailers& trailers) {
  const bool reported_by_worker = ReportedByWorker(trailers);
  const OutcomeMark mark = OutcomeMarkOfCall(status, trailers);
  absl::Status result = FromWorkerStatus(status, target_, reported_by_worker);
  {
    absl::MutexLock lock(&mu_);
    if (std::optional<uint64_t> membership = MembershipFromWorker(trailers);
        membership.has_value() && mark == OutcomeMark::kMembershipChanged) {
      // The caller hears of the change with this failure: what it issues next is for the
      // new membership.
      membership_ = std::max(membership_, *membership);
    }
    if (!result.ok() && !reported_by_worker) {
      // The worker's own failures name rank, generation and collective; a broken channel
      // to the worker ("Socket closed") names none, so say them here.
      result = absl::Status(result.code(),
                            absl::StrCat("rank ", info_.rank(), " (generation ", info_.generation(),
                                         ", ", DescribeCall(pending.call()),
                                         "): ", result.message()));
    }
    if (closing_ && absl::IsCancelled(result) && !pending.registered()) {
      result = absl::CancelledError(absl::StrCat(
          DescribeCall(pending.call()),
          ": cancelled because its Client was destroyed while it was in flight; the buffer "
          "was left untouched"));
    }
  }
  result = WithOutcomeMark(std::move(result), mark);
  if (!result.ok() && pending.registered()) {
    // What the registered buffer holds now: only the worker can say it is untouched.
    auto it = trailers.find(std::string(kRegisteredBufferMetadataKey));
    const bool untouched = reported_by_worker && it != trailers.end() &&
                           it->second == "untouched" && !pending.wrote_registered();
    if (!untouched) {
      result.SetPayload(kRegisteredBufferPayloadUrl, absl::Cord(kRegisteredBufferUnspecified));
    }
  }
  // The worker answered (OK, or its own verdict): it no longer touches the region.
  pending.Finish(std::move(result), /*worker_done=*/status.ok() || reported_by_worker);
}

bool ClientCore::SendThroughChannel(const std::shared_ptr<PendingCollective>& pending) {
  if (call_channel_ == nullptr ||
      !call_channel_->Fits(pending->request()->ByteSizeLong(), pending->answer_data_bytes())) {
    return false;
  }
  const uint64_t id = next_call_id_++;
  {
    absl::MutexLock lock(&mu_);
    // Checked under the lock that FailChannelCalls takes, after the worker's going (or the
    // channel's breaking) was noted: a call registered later would never be answered, nor
    // failed. Start checked detached_ too, but before staging the tensor, which takes time.
    if (detached_.has_value() || !channel_usable_) return false;
    channel_calls_.emplace(id, pending);
  }
  const absl::Status sent =
      call_channel_->Send(id, pending->call().spec.kind, *pending->request(),
                          WaitLimit{SteadyDeadline(kChannelSendTimeout), nullptr});
  if (sent.ok()) return true;
  // Not sent: the RPC carries it instead, as if the channel did not exist.
  absl::MutexLock lock(&mu_);
  channel_calls_.erase(id);
  return false;
}

void ClientCore::OnChannelAnswer(const v1::CallAnswer& answer) {
  std::shared_ptr<PendingCollective> pending;
  {
    absl::MutexLock lock(&mu_);
    auto it = channel_calls_.find(answer.call_id());
    if (it == channel_calls_.end()) return;  // concluded here already (the Client closed)
    pending = std::move(it->second);
    channel_calls_.erase(it);
  }
  *pending->response() = answer.response();
  Trailers trailers(answer.trailers().begin(), answer.trailers().end());
  Conclude(*pending, grpc::Status(static_cast<grpc::StatusCode>(answer.code()), answer.message()),
           trailers);
  Forget(std::move(pending));
}

void ClientCore::FailChannelCalls(const grpc::Status& why) {
  absl::flat_hash_map<uint64_t, std::shared_ptr<PendingCollective>> calls;
  {
    absl::MutexLock lock(&mu_);
    calls.swap(channel_calls_);
  }
  for (auto& [id, pending] : calls) {
    Conclude(*pending, why, Trailers());
    Forget(std::move(pending));
  }
}

void ClientCore::OpenCallChannel() {
  const uint64_t capacity = CallChannelLayout::kDefaultCapacity;
  absl::StatusOr<std::shared_ptr<RegisteredMemory>> memory =
      RegisterMemory(CallChannelLayout::BufferBytes(capacity));
  if (!memory.ok()) return;  // e.g. --max_registered_buffers=0: every call takes its RPC
  auto channel = std::make_unique<CallChannel>(
      *memory, capacity, [this](const v1::CallAnswer& answer) { OnChannelAnswer(answer); },
      [this](const absl::Status& why) {
        // Not what a worker writes: no answer through it can be trusted any more.
        {
          absl::MutexLock lock(&mu_);
          channel_usable_ = false;
        }
        FailChannelCalls(grpc::Status(grpc::StatusCode::DATA_LOSS,
                                      absl::StrCat("the call channel to the worker broke: ",
                                                   why.message())));
      },
      options_.call_channel_spin);
  grpc::ClientContext context;
  PrepareControlCall(context, kRegisterTimeout);
  v1::OpenCallChannelRequest request;
  request.set_buffer_id((*memory)->id());
  request.set_mailbox_capacity(capacity);
  v1::OpenCallChannelResponse response;
  // A worker that does not know the channel (older) or refuses it: RPCs, as before.
  if (!stub_->OpenCallChannel(&context, request, &response).ok()) return;
  call_channel_ = std::move(channel);
  absl::MutexLock lock(&mu_);
  channel_usable_ = true;
}

void ClientCore::Forget(std::shared_ptr<PendingCollective> pending) {
  absl::MutexLock lock(&mu_);
  in_flight_.erase(pending);
  // Possibly the last reference: the RPC's context goes while this core, and with it the
  // channel, is still alive (the destructor is waiting on mu_ for in_flight_ to empty).
  pending.reset();
}

}  // namespace ringsync::internal
