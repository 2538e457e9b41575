// WorkerService: the client API (ringsync.v1.Worker) a worker serves to its training
// process. Each collective RPC is validated, turned into a CollectiveJob for the
// executor, and answered when the ring finished it; if the client disconnects
// meanwhile the job is cancelled, which aborts the collective on every rank with a
// reason naming this worker.
//
// The collective RPCs are callback reactors: a waiting collective holds no thread, the
// executor's completion answers it and the client's cancellation reaches its job as an
// event. GetInfo and Attach (one stream per worker, which watches the ring's status)
// stay synchronous.
#pragma once

#include <atomic>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "daemon/metrics/refusals.h"
#include "daemon/worker/client_call_channel.h"
#include "daemon/worker/client_gate.h"
#include "daemon/worker/descriptor_inbox.h"
#include "daemon/worker/collective_executor.h"
#include "daemon/worker/collective_job_request.h"
#include "daemon/worker/registered_buffers.h"
#include "daemon/worker/ring_manager.h"
#include "ringsync/v1/worker.grpc.pb.h"

namespace ringsync {

struct WorkerServiceOptions {
  std::string worker_id;
  std::string reduce_device;  // the reducer's name, reported to clients
  std::string shm_dir = "/dev/shm";
  absl::Duration default_timeout = absl::Seconds(60);
  uint64_t max_inline_bytes = 0;  // told to clients in WorkerInfo
  RegisteredBufferLimits registered_buffers;
  // How long the call channel's thread looks for the next request before it sleeps.
  absl::Duration shm_spin = absl::ZeroDuration();
};

using WorkerServiceBase = v1::Worker::WithCallbackMethod_AllReduce<
    v1::Worker::WithCallbackMethod_Broadcast<v1::Worker::WithCallbackMethod_AllGather<
        v1::Worker::WithCallbackMethod_Barrier<
            v1::Worker::WithCallbackMethod_ReduceScatter<
                v1::Worker::WithCallbackMethod_Scatter<v1::Worker::WithCallbackMethod_Gather<
                    v1::Worker::WithCallbackMethod_AllToAll<v1::Worker::Service>>>>>>>>;

class WorkerService final : public WorkerServiceBase {
 public:
  // `peers` (the unix socket's connections; null: none) and `refusals` (null: not
  // counted) must outlive this.
  WorkerService(WorkerServiceOptions options, RingManager& ring, CollectiveExecutor& executor,
                const LocalPeers* peers = nullptr, metrics::Refusals* refusals = nullptr);

  // Ends open Attach streams (shutdown).
  void Stop() { stopping_ = true; }
  // Where clients hand over registered buffers' descriptors (descriptor_inbox.h); set
  // before the service serves, and outliving it. Without one, only /proc paths work.
  void UseDescriptorInbox(DescriptorInbox* inbox) { descriptors_ = inbox; }
  // The attached training process's registered buffers (for the metrics).
  const RegisteredBuffers& registered_buffers() const { return registered_; }

  grpc::Status GetInfo(grpc::ServerContext* context, const v1::GetInfoRequest* request,
                       v1::WorkerInfo* response) override;
  grpc::ServerUnaryReactor* AllReduce(grpc::CallbackServerContext* context,
                                      const v1::CollectiveRequest* request,
                                      v1::CollectiveResponse* response) override;
  grpc::ServerUnaryReactor* Broadcast(grpc::CallbackServerContext* context,
                                      const v1::CollectiveRequest* request,
                                      v1::CollectiveResponse* response) override;
  grpc::ServerUnaryReactor* AllGather(grpc::CallbackServerContext* context,
                                      const v1::CollectiveRequest* request,
                                      v1::CollectiveResponse* response) override;
  grpc::ServerUnaryReactor* Barrier(grpc::CallbackServerContext* context,
                                    const v1::CollectiveRequest* request,
                                    v1::CollectiveResponse* response) override;
  grpc::ServerUnaryReactor* ReduceScatter(grpc::CallbackServerContext* context,
                                          const v1::CollectiveRequest* request,
                                          v1::CollectiveResponse* response) override;
  grpc::ServerUnaryReactor* Scatter(grpc::CallbackServerContext* context,
                                    const v1::CollectiveRequest* request,
                                    v1::CollectiveResponse* response) override;
  grpc::ServerUnaryReactor* Gather(grpc::CallbackServerContext* context,
                                   const v1::CollectiveRequest* request,
                                   v1::CollectiveResponse* response) override;
  grpc::ServerUnaryReactor* AllToAll(grpc::CallbackServerContext* context,
                                     const v1::CollectiveRequest* request,
                                     v1::CollectiveResponse* response) override;
  grpc::Status Attach(grpc::ServerContext* context, const v1::AttachRequest* request,
                      grpc::ServerWriter<v1::WorkerEvent>* writer) override;
  grpc::Status Detach(grpc::ServerContext* context, const v1::DetachRequest* request,
                      v1::DetachResponse* response) override;
  grpc::Status RegisterBuffer(grpc::ServerContext* context,
                              const v1::RegisterBufferRequest* request,
                              v1::RegisterBufferResponse* response) override;
  grpc::Status ReleaseBuffer(grpc::ServerContext* context, const v1::ReleaseBufferRequest* request,
                             v1::ReleaseBufferResponse* response) override;
  grpc::Status OpenCallChannel(grpc::ServerContext* context,
                               const v1::OpenCallChannelRequest* request,
                               v1::OpenCallChannelResponse* response) override;

 private:
  grpc::ServerUnaryReactor* RunCollective(CollectiveKind kind, grpc::CallbackServerContext* context,
                                          const v1::CollectiveRequest& request,
                                          v1::CollectiveResponse* response);
  // A collective request of the attached client, under `limits`, as a job for the
  // executor — a refusal takes the request's turn on the ring as a refused job — or the
  // error that answers this call alone (no room, a refusal that needs no turn).
  absl::StatusOr<std::shared_ptr<CollectiveJob>> TakeIn(CollectiveKind kind,
                                                        const v1::CollectiveRequest& request,
                                                        const JobRequestLimits& limits);
  // `run_here_if_idle`: CollectiveExecutor::SubmitAndRunIfIdle rather than Submit.
  void SubmitJob(std::shared_ptr<CollectiveJob> job, bool run_here_if_idle = false);
  // A request that came through the call channel: as RunCollective, answered by `answer`.
  // Run on the channel's thread when the executor is idle (a small collective's
  // hand-off to the executor's thread is a wake-up on every rank).
  void SubmitFromChannel(CollectiveKind kind, const v1::CollectiveRequest& request,
                         const JobRequestLimits& limits, const ClientCallChannel::Answer& answer);
  // Stops the channel and cancels (with `why`) its collectives still running.
  void CloseCallChannel(const absl::Status& why);
  // The attached client, when the call carries its token; otherwise the call is refused
  // (counted and logged) with the error returned.
  absl::StatusOr<AttachedClient> CheckCaller(grpc::ServerContextBase& context,
                                             absl::string_view what);
  // The limits for a request from `client` arriving on `context`'s connection: shared
  // tensors only from a client attached over the unix socket, on the unix socket.
  JobRequestLimits LimitsFor(const AttachedClient& client,
                             const grpc::ServerContextBase& context) const;
  // Registers the buffer `request` names for `client`: its descriptor from the
  // descriptor socket when it names a nonce, else by /proc path.
  absl::StatusOr<uint64_t> RegisterOf(const v1::RegisterBufferRequest& request,
                                      const PeerCredentials& client);
  void Refuse(absl::string_view reason, absl::string_view detail);
  void FillInfo(const RingStatus& status, v1::WorkerInfo* info) const;
  // Removes the detached client's files left in shm_dir, those it kept for reuse and any
  // it never sent: a client that crashed never removes its own. Only files of the
  // client's uid are touched, and only by names it used (kept_files_) or that carry its
  // real pid (ringsync-<pid>-, when its pid is visible from here).
  void RemoveClientFiles(const std::optional<PeerCredentials>& client);

  const WorkerServiceOptions options_;
  const JobRequestLimits limits_;
  RingManager& ring_;
  CollectiveExecutor& executor_;
  const LocalPeers* const peers_;
  metrics::Refusals* const refusals_;
  ClientGate gate_;
  DescriptorInbox* descriptors_ = nullptr;
  std::atomic<bool> stopping_{false};
  // Shared files the attached client asked the worker to leave in place (reuse).
  absl::Mutex kept_mu_;
  std::set<std::string> kept_files_ ABSL_GUARDED_BY(kept_mu_);
  // The attached client's registered buffers; forgotten when it detaches.
  RegisteredBuffers registered_;
  // The attached client's call channel, if it opened one; closed when it detaches.
  absl::Mutex channel_mu_;
  std::unique_ptr<ClientCallChannel> channel_ ABSL_GUARDED_BY(channel_mu_);
  // The collectives it submitted that may still run (expired ones pruned on submit).
  std::vector<std::weak_ptr<CollectiveJob>> channel_jobs_ ABSL_GUARDED_BY(channel_mu_);
  // Why, while CloseCallChannel waits for the channel's thread to stop.
  std::optional<absl::Status> channel_closing_ ABSL_GUARDED_BY(channel_mu_);
};

}  // namespace ringsync
