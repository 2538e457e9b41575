// PendingCollective: one collective from the moment its request is built until its
// result is in the caller's buffer (or it failed and the buffer was left alone).
//
// It owns the RPC's context, request and response, and the shared-memory region when
// the tensor travels that way. CollectiveHandle is a thin shared reference to it; the
// RPC's completion callback holds another, so the handle may be dropped at any time
// after completion.
//
// Thread-safety: Ready/Wait may be called from any thread; PrepareData before the RPC
// starts and Finish once, from the RPC's completion callback.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "client/src/collective_call.h"
#include "client/src/shared_memory_pool.h"
#include "client/src/shared_memory_region.h"
#include "client/src/staging_arena.h"
#include "client/src/staging_buffers.h"
#include "grpcpp/client_context.h"
#include "ringsync/collective_handle.h"
#include "ringsync/v1/worker.pb.h"
#include "daemon/shm/arrival_marks.h"

namespace ringsync::internal {

class PendingCollective {
 public:
  // A handle that is already complete with `status` (e.g. a call that failed validation).
  static CollectiveHandle Completed(absl::Status status);
  static std::shared_ptr<PendingCollective> CompletedState(absl::Status status);
  static CollectiveHandle MakeHandle(std::shared_ptr<PendingCollective> pending);

  PendingCollective(CollectiveCall call, CallBytes bytes);

  // For a broadcast or scatter from another rank (the root's bytes overwrite this one's):
  // the shared or registered memory the input would be copied into is left as it is, and
  // the request says so (CollectiveRequest.input_left_out); a broadcast's inline data is
  // still carried, a scatter's not (the worker makes the room). Call first.
  void LeaveInputOut() { leave_input_out_ = true; }

  // Copies the caller's input into the request: into a shared-memory region from `pool`
  // when that is not null, else inline; a collective without data (a barrier, count 0)
  // names none. When no region can be had (e.g. /dev/shm is full) the data goes inline
  // and a warning is logged once.
  void PrepareData(std::shared_ptr<SharedMemoryPool> pool);
  // Names [offset, offset + buffer bytes) of registered buffer `id` instead: the worker
  // reduces it in place, and nothing is copied out. An all-gather's input is copied into
  // the output's first slot first (where the worker takes it from), unless it lies there;
  // a reduce-scatter's range is its input, its output the block of the rank in it.
  void UseRegistered(uint64_t id, uint64_t offset);
  bool registered() const { return registered_; }
  // Whether the SDK itself wrote into the caller's registered buffer (an all-gather's
  // input into its first slot): a failure then never leaves the buffer untouched.
  bool wrote_registered() const { return wrote_registered_; }
  // Copies the caller's input into `buffer` (registered memory from `staging`, at least
  // the output's size) and names it: the worker reduces the copy in place, and the result
  // is copied out on success, as from a shared-memory file. For an all-reduce or a
  // broadcast (whose result has the input's size).
  void UseStaging(std::shared_ptr<RegisteredMemory> buffer,
                  std::shared_ptr<StagingBuffers> staging);

  // As UseStaging, but nothing is copied yet: the request names arrival marks after the
  // input (daemon/shm/arrival_marks.h; `buffer` holds ArrivalBufferBytes of the input), and
  // CopyInArriving copies the input in once the request is on its way. An all-reduce of
  // one buffer (no pieces) or a reduce-scatter only (their ring reads the input in
  // AllReduceInputOrder).
  void UseStagingArriving(std::shared_ptr<RegisteredMemory> buffer,
                          std::shared_ptr<StagingBuffers> staging);
  // Copies the input into the staging buffer block by block in the order rank `rank` of
  // `world_size` reads it (AllReduceInputOrder; front to back when the rank is unknown),
  // marking each, so the worker's ring starts before the copy ends. Stops early once the
  // collective has finished (failed); a Finish that came during the copy completes after
  // it, so the buffer is never handed on while this writes into it.
  void CopyInArriving(int rank, int world_size);
  // As UseStaging, in a slice of the client's staging arena (staging_arena.h), which goes
  // back to it when the collective completes.
  void UseArenaSlice(StagingArena::Slice slice);

  grpc::ClientContext* context() { return &context_; }
  v1::CollectiveRequest* request() { return &request_; }
  v1::CollectiveResponse* response() { return &response_; }
  const CollectiveCall& call() const { return call_; }
  const CallBytes& bytes() const { return bytes_; }

  // The RPC ended with `rpc_status`. On OK the result is checked and copied into the
  // caller's buffer. The region (or staging buffer, or arena slice) goes back to its pool when
  // `worker_done` (the worker answered, so it no longer writes to it), else it is removed
  // or retired (a cancelled RPC's collective may still be running in the worker). Then the
  // collective completes.
  void Finish(absl::Status rpc_status, bool worker_done);
  bool arriving() const { return arrival_.has_value(); }
  // Bytes of the result the worker's answer carries: the output when the tensor travels
  // inline, 0 when the worker leaves the result in memory both map (a registered buffer,
  // staging, the arena, a shared-memory file).
  size_t answer_data_bytes() const;

  bool Ready() const;
  absl::Status Wait();
  absl::Status Wait(absl::Duration timeout);

  // For async fusion (FusionQueue), set before the collective is started or handed out:
  // `on_complete` runs once with the final status, after the collective completed (not
  // under its lock); `on_wait` runs on every Ready() or Wait() that finds it not complete
  // yet, before it blocks (the caller wants this one: its batch must end).
  void SetHooks(std::function<void(const absl::Status&)> on_complete,
                std::function<void()> on_wait);
  // Completes a collective whose data went in another one (a fused batch): its RPC was
  // never started.
  void Resolve(absl::Status status);

 private:
  absl::Status CopyResultOut();
  // For a collective in the caller's registered buffer: a reduce-scatter's block moved to
  // the output when the worker ran it as another rank than the call assumed.
  absl::Status MoveRegisteredBlock();
  // InternalError unless the result's block (response_.result_offset, the output's size)
  // lies inside the range the collective ran in (bytes_.buffer()).
  absl::Status CheckResultOffset() const;
  // Where the worker leaves the result in memory both map (a shared-memory file, a staging
  // buffer, an arena slice); null when it comes inline, or in place (registered).
  const void* ResultInSharedMemory() const;
  void FinishNow(absl::Status rpc_status, bool worker_done);
  // Names [offset, offset + output bytes) of registered buffer `id` in the request.
  void NameRegistered(uint64_t id, uint64_t offset);
  // The caller's input into `to` (bytes_.input bytes), from its one buffer or, for a
  // fused all-reduce, its pieces one after another; the result back the same way.
  void GatherInput(char* to) const;
  // GatherInput into shared or registered memory, unless the input is left out.
  void FillStaged(char* to);
  void ScatterOutput(const char* from) const;
  void Complete(absl::Status status);

  const CollectiveCall call_;
  const CallBytes bytes_;
  grpc::ClientContext context_;
  v1::CollectiveRequest request_;
  v1::CollectiveResponse response_;
  std::optional<SharedMemoryRegion> region_;
  std::shared_ptr<SharedMemoryPool> pool_;  // where region_ came from
  std::shared_ptr<RegisteredMemory> staged_;  // registered memory the tensor is staged in
  std::shared_ptr<StagingBuffers> staging_;   // where staged_ came from
  std::optional<StagingArena::Slice> slice_;  // or the arena slice it is staged in
  bool registered_ = false;
  bool wrote_registered_ = false;
  bool leave_input_out_ = false;
  std::optional<ArrivalLayout> arrival_;  // set by UseStagingArriving
  std::function<void(const absl::Status&)> on_complete_;
  std::function<void()> on_wait_;

  mutable absl::Mutex mu_;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status status_ ABSL_GUARDED_BY(mu_);
  // While CopyInArriving copies: a Finish that came meanwhile waits here for its end.
  bool copying_in_ ABSL_GUARDED_BY(mu_) = false;
  struct FinishLater {
    absl::Status rpc_status;
    bool worker_done = false;
  };
  std::optional<FinishLater> finish_later_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ringsync::internal
