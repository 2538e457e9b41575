// CollectiveWork: c10d's Work (and its Future) for one ringsync collective.
//
// The process group starts the collective through the SDK, wraps its CollectiveHandle in
// a CollectiveWork and posts Complete() to its SerialExecutor. Complete() waits for the
// collective, runs the op's finishing step (the all-gather's copy into the caller's
// tensors), then completes the Work and the Future together: with the output tensors, or
// with a RuntimeError carrying the worker's message. Work::wait(), isCompleted() and the
// future (DDP's comm hooks) all observe that one completion.
#pragma once

#include <functional>
#include <vector>

#include <ATen/core/ivalue.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include "ringsync/collective_handle.h"

namespace ringsync::python {

class CollectiveWork final : public c10d::Work {
 public:
  // `outputs`: what result() and the future hold. `keep_alive`: tensors the SDK reads or
  // writes until completion. `on_success` runs after the collective succeeded, before
  // completion (may be empty).
  CollectiveWork(int rank, c10d::OpType type, const char* what, std::vector<at::Tensor> outputs,
                 std::vector<at::Tensor> keep_alive, CollectiveHandle handle,
                 std::function<void()> on_success);

  // Blocks until the collective completes, then completes this Work and its future.
  // `release` (may be empty) runs once the collective and its finishing step no longer
  // touch their memory, before the Work completes: what it hands back (the process
  // group's scratch buffers) is back before the thread waiting on this Work starts its
  // next call, which would otherwise allocate (and page-fault) a buffer of its own.
  void Complete(const std::function<void()>& release = nullptr);

  std::vector<at::Tensor> result() override { return outputs_; }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }

 private:
  const char* what_;  // "allreduce", for messages
  std::vector<at::Tensor> outputs_;
  std::vector<at::Tensor> keep_alive_;
  CollectiveHandle handle_;
  std::function<void()> on_success_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

}  // namespace ringsync::python
