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
#include <string>

#include "daemon/worker/collective_executor.h"
#include "daemon/worker/collective_job_request.h"
#include "daemon/worker/ring_manager.h"
#include "ringsync/v1/worker.grpc.pb.h"

namespace ringsync {

struct WorkerServiceOptions {
  std::string worker_id;
  std::string reduce_device;  // the reducer's name, reported to clients
  std::string shm_dir = "/dev/shm";
  absl::Duration default_timeout = absl::Seconds(60);
};

using WorkerServiceBase = v1::Worker::WithCallbackMethod_AllReduce<
    v1::Worker::WithCallbackMethod_Broadcast<v1::Worker::WithCallbackMethod_AllGather<
        v1::Worker::WithCallbackMethod_Barrier<v1::Worker::Service>>>>;

class WorkerService final : public WorkerServiceBase {
 public:
  WorkerService(WorkerServiceOptions options, RingManager& ring, CollectiveExecutor& executor);

  // Ends open Attach streams (shutdown).
  void Stop() { stopping_ = true; }

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
  grpc::Status Attach(grpc::ServerContext* context, const v1::AttachRequest* request,
                      grpc::ServerWriter<v1::WorkerEvent>* writer) override;
  grpc::Status Detach(grpc::ServerContext* context, const v1::DetachRequest* request,
                      v1::DetachResponse* response) override;

 private:
  grpc::ServerUnaryReactor* RunCollective(CollectiveKind kind, grpc::CallbackServerContext* context,
                                          const v1::CollectiveRequest& request,
                                          v1::CollectiveResponse* response);
  void FillInfo(const RingStatus& status, v1::WorkerInfo* info) const;
  // Removes the detached client's files (named ringsync-<client_pid>-) left in shm_dir,
  // those it kept for reuse and any it never sent: a client that crashed never removes
  // its own.
  void RemoveClientFiles(int64_t client_pid);

  const WorkerServiceOptions options_;
  const JobRequestLimits limits_;
  RingManager& ring_;
  CollectiveExecutor& executor_;
  std::atomic<bool> stopping_{false};
};

}  // namespace ringsync
