// RingsyncProcessGroup: torch.distributed's ProcessGroup over the ringsync SDK, so that
// `dist.init_process_group("ringsync", ...)` and DDP run their collectives through this
// process's ringsync worker (ringsync/torch/backend.py registers it).
//
// It has what the daemon has: allreduce (SUM, AVG, MIN, MAX, PRODUCT, and PREMUL_SUM with
// a scalar factor), broadcast, allgather (and _allgather_base), reduce_scatter (and
// _reduce_scatter_base), scatter, gather, alltoall (and alltoall_base, all_to_all_single:
// equal splits only), barrier; and what one of those makes: reduce,
// allreduce_coalesced (the SDK's tensor group), allgather_coalesced — each one
// collective, moving more bytes than a dedicated algorithm would (process_group.cc says
// how many). Tensors the SDK reads or writes are CPU tensors, contiguous, of a dtype
// ringsync reduces; lists copied to or from may have any layout. Point-to-point ops
// (send, recv) and uneven all-to-alls raise a RuntimeError that names them. Each op returns at once
// with a CollectiveWork whose Work and Future complete when the ring has finished (DDP's
// buckets and comm hooks rely on the future).
//
// Ranks: torch's rank and world size must be the ring's (the worker's rank follows the
// sorted worker ids); a mismatch fails creation with both numbers.
//
// Thread-safety: ops may be called from any thread (DDP calls them from autograd's); the
// SDK queues them in call order, which every rank must match, as for any c10d backend.
#pragma once

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "client/python/src/c10d/serial_executor.h"
#include "ringsync/client.h"

namespace ringsync::python {

class RingsyncProcessGroup final : public c10d::ProcessGroup {
 public:
  struct Options {
    std::string worker;  // the SDK target, "unix:/run/ringsync/w0.sock"
    absl::Duration connect_timeout = absl::Seconds(60);
    // Per collective; zero means the worker's --collective_timeout.
    absl::Duration collective_timeout = absl::ZeroDuration();
  };

  // Connects to the worker and checks that the ring's rank and size are torch's.
  static absl::StatusOr<c10::intrusive_ptr<RingsyncProcessGroup>> Create(int rank, int size,
                                                                        const Options& options);
  RingsyncProcessGroup(int rank, int size, std::unique_ptr<Client> client, const Options& options);
  ~RingsyncProcessGroup() override;

  const std::string getBackendName() const override { return "ringsync"; }

  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;

  // Composed from the collectives above.
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                        const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                        std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(
      std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts) override;

  // The daemon's all-to-all: equal splits (or none given) only.
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& output_splits,
                                               std::vector<int64_t>& input_splits,
                                               const c10d::AllToAllOptions& opts) override;
  // Lists of world_size tensors of one size: the inputs end to end in scratch, exchanged
  // there, copied out.
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs,
                                          std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;
  // Point-to-point ops, which the daemon has not got: each raises a RuntimeError naming
  // itself.
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>&, int, int) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>&, int, int) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>&, int) override;

 private:
  // Wraps a started collective in a Work that the executor completes; `scratch` (read or
  // written by the collective, kept alive until then) goes back to scratch_ once the
  // collective and `on_success` are done, before the Work completes.
  c10::intrusive_ptr<c10d::Work> Track(c10d::OpType type, const char* what,
                                       std::vector<at::Tensor> outputs,
                                       std::vector<at::Tensor> keep_alive, CollectiveHandle handle,
                                       std::function<void()> on_success = {},
                                       std::vector<at::Tensor> scratch = {});
  // All-gathers `input` (contiguous, of `dtype`) into a scratch buffer of world_size
  // blocks and, once that succeeded, copies the buffer into `targets` one after another.
  // `input_is_scratch`: `input` came from scratch_ and goes back with the buffer.
  c10::intrusive_ptr<c10d::Work> AllGatherInto(c10d::OpType type, const char* what,
                                               at::Tensor input, DType dtype,
                                               std::vector<at::Tensor> targets,
                                               std::chrono::milliseconds timeout,
                                               bool input_is_scratch = false);
  // Reduce-scatters `flat` (contiguous: this rank's inputs for every rank, end to end)
  // into `output` (through a scratch block when it is not contiguous). `input_is_scratch`:
  // `flat` came from scratch_ and goes back to it; it is then reduce-scattered in place
  // (the rank's block of it the output) and the block copied into `output`.
  c10::intrusive_ptr<c10d::Work> ReduceScatterOf(at::Tensor flat, bool input_is_scratch,
                                                 at::Tensor output, DType dtype,
                                                 const c10d::ReduceScatterOptions& opts,
                                                 c10d::OpType type);
  // An op's own timeout, else the group's.
  absl::Duration TimeoutOf(std::chrono::milliseconds op_timeout) const;
  // The SDK's options for an op with torch's timeout `op_timeout`.
  CollectiveOptions OptionsOf(std::chrono::milliseconds op_timeout) const;
  // An all-reduce's op and options for torch's reduce op and timeout; `op` names the torch
  // op in errors.
  struct Reduction {
    ReduceOp op = ReduceOp::kSum;
    AllReduceOptions options;
  };
  Reduction ReductionOf(const c10d::ReduceOp& reduce_op, std::chrono::milliseconds op_timeout,
                        const char* op) const;

  // The composed ops' scratch buffers, kept between calls: a fresh tensor per call pays
  // for its pages each time (a 64 MiB one ~180 ms of page faults on a VM). A new one of
  // kMinRegisteredBytes or more lies in memory registered with the worker where it can be
  // had (at most kMaxRegistered at once, of the worker's --max_registered_buffers), so
  // that a collective on it runs in place: no copy into staging and back (reduce's copy
  // on the other ranks, the gathers' output, scatter's and reduce_scatter's concatenated
  // list). Thread-safe.
  class ScratchPool {
   public:
    // An idle tensor of `numel` elements of `options`' dtype, or a new one (uninitialized),
    // registered through `client` where it is large enough (null: never).
    at::Tensor Take(int64_t numel, const at::TensorOptions& options, Client* client);
    // Back for reuse once no collective reads or writes it; beyond kMaxIdleBytes idle, the
    // oldest go.
    void Give(at::Tensor tensor);
    static constexpr int64_t kMaxIdleBytes = int64_t{1} << 30;
    static constexpr int64_t kMinRegisteredBytes = int64_t{1} << 20;
    static constexpr int kMaxRegistered = 16;

   private:
    // A tensor over a new registered buffer, which it frees with its storage; nullopt
    // where the worker takes none (over TCP, at its bound) or kMaxRegistered are alive.
    std::optional<at::Tensor> Registered(int64_t numel, const at::TensorOptions& options,
                                         Client& client);

    absl::Mutex mu_;
    std::vector<at::Tensor> idle_ ABSL_GUARDED_BY(mu_);  // oldest first
    // Registered scratch tensors alive, wherever they are; their deleters count down.
    const std::shared_ptr<std::atomic<int>> registered_alive_ =
        std::make_shared<std::atomic<int>>(0);
  };
  // `tensors` end to end in a scratch tensor, with room for `room_after` elements more
  // after them.
  at::Tensor ConcatenatedScratch(const std::vector<at::Tensor>& tensors, int64_t room_after = 0);

  Options options_;
  std::unique_ptr<Client> client_;
  ScratchPool scratch_;
  SerialExecutor completions_;  // last: its jobs give scratch back, so it stops first
};

}  // namespace ringsync::python
