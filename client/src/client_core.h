// ClientCore: what a ringsync::Client is made of — the channel to the worker, the Attach
// stream with its background reader, the collective sequence, and the collectives in
// flight. Client is its public face.
//
// Thread-safety: every method may be called concurrently; see ringsync/client.h.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "client/src/call_channel.h"
#include "client/src/collective_call.h"
#include "client/src/fusion_queue.h"
#include "client/src/pending_collective.h"
#include "client/src/registered_buffer_registry.h"
#include "client/src/shared_memory_pool.h"
#include "client/src/staging_arena.h"
#include "client/src/staging_buffers.h"
#include "client/src/worker_status.h"
#include "client/src/worker_target.h"
#include "core/sync/steady_deadline.h"
#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"
#include "ringsync/client.h"
#include "ringsync/registered_buffer.h"
#include "ringsync/v1/worker.grpc.pb.h"

namespace ringsync::internal {

class ClientCore {
 public:
  static absl::StatusOr<std::unique_ptr<ClientCore>> Connect(absl::string_view target,
                                                             const ClientOptions& options);
  // Cancels the collectives in flight and the Attach stream; waits for all of them.
  ~ClientCore();

  // The worker's latest report.
  v1::WorkerInfo info() const;
  // True while attached and the worker reports a formed ring.
  bool ready() const;
  // False once the Attach stream ended.
  bool attached() const;

  // Waits until `deadline` for the worker to report a formed ring; the error says what
  // was missing, and that `knob` sets the wait (of `wait`).
  absl::Status AwaitReady(SteadyDeadline deadline, absl::Duration wait, absl::string_view knob);

  // Validates `call`, numbers it, and starts its RPC — with fusion on, once the fusion
  // queue sends it (fusion_queue.h). Failures before the RPC come back as an
  // already-completed handle and do not use up a sequence number.
  CollectiveHandle Start(CollectiveCall call);

  // A buffer of `size_bytes` registered with the worker (ringsync/registered_buffer.h).
  absl::StatusOr<RegisteredBuffer> Allocate(size_t size_bytes);
  // Client::ReleaseIdleMemory.
  size_t ReleaseIdleMemory();
  // The caller's call was refused before it could be described (`why`, InvalidArgument):
  // it takes its turn on the ring as a refusal, and the handle completes with `why`.
  CollectiveHandle Refuse(CollectiveCall call, absl::Status why);

 private:
  ClientCore(WorkerTarget target, const ClientOptions& options,
             std::shared_ptr<grpc::Channel> channel);

  // Body of the attach thread: reads WorkerEvents until the stream ends.
  void ReadEvents();
  bool ReadyLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool ReadyOrDetached() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool NothingInFlight() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Start without the fusion queue; `on_complete` (may be empty) runs once with the
  // final status, also for a call that fails before its RPC.
  std::shared_ptr<PendingCollective> StartNow(
      CollectiveCall call, std::function<void(const absl::Status&)> on_complete);
  void StartRpc(const std::shared_ptr<PendingCollective>& pending);
  // The caller's call was refused here (`why`); the ring still expects this rank's
  // collective. A request without data that says so takes its turn, so that the worker
  // fails the collective on every rank at once rather than at their deadlines.
  void TellRingOfRefusal(CollectiveCall call, const absl::Status& why);
  // Tells the worker this training process is done (Worker.Detach), so that it holds
  // the ring's next collectives for the next one rather than failing them.
  void SayGoodbye();
  void OnRpcDone(PendingCollective& pending, const grpc::Status& status);
  // The call's end, from its RPC or from the call channel: the worker's status and
  // trailers made into the caller's outcome.
  void Conclude(PendingCollective& pending, const grpc::Status& status, const Trailers& trailers);
  // Registers a call channel with the worker (call_channel.h); without one (refused, an
  // older worker) every call takes its RPC.
  void OpenCallChannel();
  // Sends `pending` through the call channel; false when it must take its RPC.
  bool SendThroughChannel(const std::shared_ptr<PendingCollective>& pending)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(issue_mu_);
  void OnChannelAnswer(const v1::CallAnswer& answer);
  // Ends every call in the channel with `why` (the worker went, the Client closes).
  void FailChannelCalls(const grpc::Status& why);
  // Takes `pending` off the in-flight list once gRPC has dropped the RPC's callback.
  void Forget(std::shared_ptr<PendingCollective> pending);
  // Where `call`'s buffer lies in a registered buffer, when it runs in place there: an
  // AllReduce or Broadcast with data, an AllGather's output (to a worker that
  // `gathers_in_registered`), or a ReduceScatter's input whose output is the block of the
  // `worker`'s rank in it (NCCL's in-place form).
  std::optional<RegisteredBufferRegistry::Location> InRegisteredBuffer(
      const CollectiveCall& call, const CallBytes& bytes, const v1::WorkerInfo& worker) const;
  // Whether the worker can run `call` in place in registered memory the SDK stages it in:
  // an all-reduce or broadcast of one buffer, a reduce-scatter (the range its input, the
  // result the rank's block of it), and an all-gather (the range its whole result, the
  // input copied into the first slot) where the worker `gathers_in_registered`.
  static bool RunsInStaging(const CollectiveCall& call, const CallBytes& bytes,
                            bool gathers_in_registered);
  // Registered memory to stage a call that RunsInStaging in (staging_buffers.h), of
  // bytes.buffer(), with room for arrival marks after it when `arriving`; null where it
  // cannot be had (then a file carries it).
  std::shared_ptr<RegisteredMemory> Stage(const CallBytes& bytes, bool arriving);
  // Whether a staged `call` may be copied in while the worker already runs it: an
  // all-reduce of one buffer, to a worker that says it `takes_arriving_input`, or a
  // reduce-scatter (the all-reduce's first steps), to one that says so for it too.
  static bool ArrivesWhileRunning(const CollectiveCall& call, const v1::WorkerInfo& worker);
  // A slice of the staging arena for a small call that RunsInStaging (staging_arena.h),
  // registering the arena first when there is none yet; nullopt where it cannot be had
  // (then the tensor travels inline).
  std::optional<StagingArena::Slice> StageInArena(const CallBytes& bytes);
  // Makes memory of `size_bytes` and registers it with the worker; where the worker has
  // as many as it takes, idle staging buffers make room first.
  absl::StatusOr<std::shared_ptr<RegisteredMemory>> RegisterMemory(size_t size_bytes);
  // One attempt: the worker's refusal as it is.
  absl::StatusOr<std::shared_ptr<RegisteredMemory>> RegisterMemoryOnce(size_t size_bytes);
  // A control RPC's context: its deadline, and the attach token the worker asks for.
  void PrepareControlCall(grpc::ClientContext& context, absl::Duration timeout);
  // Tells the worker that registered buffer `id` is gone (best effort).
  void ReleaseRegistered(uint64_t id);

  const WorkerTarget target_;
  const ClientOptions options_;
  // Shared with the collectives, whose regions go back to it when they complete.
  const std::shared_ptr<SharedMemoryPool> shared_memory_;
  // Registered memory plain spans are staged in (null when the options say files only).
  std::shared_ptr<StagingBuffers> staging_;
  absl::Mutex arena_mu_;
  std::shared_ptr<StagingArena> arena_ ABSL_GUARDED_BY(arena_mu_);
  bool arena_off_ ABSL_GUARDED_BY(arena_mu_) = false;  // the worker refused one
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Worker::Stub> stub_;
  // The registered buffers by address; closed first thing in the destructor.
  const std::shared_ptr<RegisteredBufferRegistry> registered_;
  // Set when ClientOptions::fusion.enabled; every collective goes through it.
  std::unique_ptr<FusionQueue> fusion_;
  // Set once in Connect (before any collective) when the worker took it; reset first in
  // the destructor. channel_usable_ goes false if it broke.
  std::unique_ptr<CallChannel> call_channel_;
  grpc::ClientContext attach_context_;
  std::thread attach_thread_;

  mutable absl::Mutex mu_;
  v1::WorkerInfo info_ ABSL_GUARDED_BY(mu_);
  // The worker's secret for this attachment (its first event), sent with every request.
  std::string attach_token_ ABSL_GUARDED_BY(mu_);
  bool has_info_ ABSL_GUARDED_BY(mu_) = false;
  bool channel_usable_ ABSL_GUARDED_BY(mu_) = false;
  // The ring membership this client's collectives are issued for (worker.proto,
  // CollectiveRequest.membership): the worker's on attach, then the one named by the
  // newest membership-changed failure returned to the caller. Not simply the newest
  // WorkerInfo's: collectives the caller issues before it has seen the failure belong to
  // the old membership, and must fail alike on every rank.
  uint64_t membership_ ABSL_GUARDED_BY(mu_) = 0;
  // Set when the Attach stream ended, with how it ended.
  std::optional<absl::Status> detached_ ABSL_GUARDED_BY(mu_);
  // Collectives whose RPC callback gRPC still holds. The destructor waits for this to
  // empty before it lets go of the channel: were the last reference to a channel dropped
  // on a gRPC callback thread, gRPC 1.51 would join that thread from itself and crash
  // (grpc/grpc#32584).
  absl::flat_hash_set<std::shared_ptr<PendingCollective>> in_flight_ ABSL_GUARDED_BY(mu_);
  // Those sent through the call channel, by call id, until answered.
  absl::flat_hash_map<uint64_t, std::shared_ptr<PendingCollective>> channel_calls_
      ABSL_GUARDED_BY(mu_);
  bool closing_ ABSL_GUARDED_BY(mu_) = false;  // the destructor has begun

  // Held while a collective is numbered and its RPC started, so that RPCs leave in
  // sequence order.
  absl::Mutex issue_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  uint64_t next_sequence_ ABSL_GUARDED_BY(issue_mu_) = 1;
  uint64_t next_call_id_ ABSL_GUARDED_BY(issue_mu_) = 1;
};

}  // namespace ringsync::internal
