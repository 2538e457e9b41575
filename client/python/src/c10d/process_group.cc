#include "client/python/src/c10d/process_group.h"

#include <functional>
#include <optional>
#include <tuple>
#include <utility>
#include <vector>

#include <pybind11/pybind11.h>

#include "absl/strings/str_cat.h"
#include "client/python/src/c10d/collective_work.h"

namespace ringsync::python {
namespace {

DType DTypeOf(const at::Tensor& t, const char* op) {
  TORCH_CHECK(t.device().is_cpu(), "ringsync ", op, ": the tensor is on ", t.device().str(),
              "; the ringsync backend reduces host memory (use nccl for GPU tensors, or move "
              "the model to the CPU)");
  TORCH_CHECK(t.is_contiguous(), "ringsync ", op, ": the tensor is not contiguous; pass "
              "t.contiguous()");
  switch (t.scalar_type()) {
    case at::kFloat: return DType::kFloat32;
    case at::kDouble: return DType::kFloat64;
    case at::kHalf: return DType::kFloat16;
    case at::kBFloat16: return DType::kBFloat16;
    case at::kInt: return DType::kInt32;
    case at::kLong: return DType::kInt64;
    case at::kChar: return DType::kInt8;
    case at::kByte: return DType::kUInt8;
    default:
      TORCH_CHECK(false, "ringsync ", op, ": dtype ", t.scalar_type(), " is not one ringsync "
                  "reduces (float32, float64, float16, bfloat16, int32, int64, int8, uint8)");
  }
}

at::Tensor& OnlyTensor(std::vector<at::Tensor>& tensors, const char* op) {
  TORCH_CHECK(tensors.size() == 1, "ringsync ", op, " takes exactly one tensor per call, got ",
              tensors.size(), " (a list is the multi-device form, which ringsync has not got)");
  return tensors[0];
}

// torch's reduce op as ringsync's, with PREMUL_SUM's scalar factor as pre_scale.
std::pair<ReduceOp, double> RingsyncOpOf(const c10d::ReduceOp& reduce_op, const char* op) {
  switch (static_cast<c10d::ReduceOp::RedOpType>(reduce_op)) {
    case c10d::ReduceOp::SUM: return {ReduceOp::kSum, 1.0};
    case c10d::ReduceOp::AVG: return {ReduceOp::kAvg, 1.0};
    case c10d::ReduceOp::PRODUCT: return {ReduceOp::kProd, 1.0};
    case c10d::ReduceOp::MIN: return {ReduceOp::kMin, 1.0};
    case c10d::ReduceOp::MAX: return {ReduceOp::kMax, 1.0};
    case c10d::ReduceOp::PREMUL_SUM: {
      // A scalar factor is ringsync's pre_scale; a tensor factor has no counterpart.
      const auto* supplement =
          dynamic_cast<const c10d::NCCLPreMulSumSupplement*>(reduce_op.supplement_.get());
      TORCH_CHECK(supplement != nullptr && supplement->tensor_factors.empty(),
                  "ringsync ", op, ": PREMUL_SUM takes a scalar factor only");
      return {ReduceOp::kSum, supplement->double_factor};
    }
    default:
      TORCH_CHECK(false, "ringsync ", op, ": the bitwise ops (BAND, BOR, BXOR) are not "
                  "ringsync ops; it has SUM, AVG, PRODUCT, MIN, MAX and PREMUL_SUM");
  }
}

[[noreturn]] c10::intrusive_ptr<c10d::Work> Unsupported(const char* op) {
  TORCH_CHECK(false, "the ringsync backend has no ", op,
              " (it has no point-to-point transfers; it has allreduce, broadcast, allgather, "
              "reduce, gather, scatter, reduce_scatter, alltoall, their "
              "coalesced forms and barrier); for ",
              op, " create a second group with dist.new_group(backend=\"gloo\")");
}

// Checks that `t` is a CPU tensor of `like`'s dtype and element count (it is copied to or
// from, so it may have any layout).
void CheckLike(const at::Tensor& t, const at::Tensor& like, const char* op, const char* what) {
  TORCH_CHECK(t.device().is_cpu(), "ringsync ", op, ": one of the ", what, " is on ",
              t.device().str(), "; the ringsync backend works on host memory");
  TORCH_CHECK(t.numel() == like.numel() && t.scalar_type() == like.scalar_type(), "ringsync ",
              op, ": each of the ", what, " must hold ", like.numel(), " elements of ",
              like.scalar_type(), " (one holds ", t.numel(), " of ", t.scalar_type(), ")");
}

// Checks that `tensors` holds `count` tensors, each as CheckLike says.
void CheckList(const std::vector<at::Tensor>& tensors, int count, const at::Tensor& like,
               const char* op, const char* what) {
  TORCH_CHECK(static_cast<int>(tensors.size()) == count, "ringsync ", op, ": expected ", count,
              " ", what, ", got ", tensors.size());
  for (const at::Tensor& t : tensors) CheckLike(t, like, op, what);
}

int RootOf(int64_t root, int size, const char* op) {
  TORCH_CHECK(root >= 0 && root < size, "ringsync ", op, ": root rank ", root,
              " is not in 0..", size - 1);
  return static_cast<int>(root);
}

// An op's finishing step: copies `flat`'s elements from `offset` on into `targets`, one
// after another (each may have any layout).
std::function<void()> CopyOut(at::Tensor flat, int64_t offset, std::vector<at::Tensor> targets) {
  return [flat = std::move(flat), offset, targets = std::move(targets)] {
    at::NoGradGuard no_grad;  // results written in place, as torch's own backends do
    int64_t at = offset;
    for (at::Tensor target : targets) {
      target.copy_(flat.narrow(0, at, target.numel()).view(target.sizes()));
      at += target.numel();
    }
  };
}

// Runs `start`, an op's checks and then its one collective. A check that throws (the
// caller's list is of the wrong length, a tensor of another dtype...) refuses that
// collective in its turn before the error reaches the caller, so that the other ranks fail
// now, naming this one, instead of waiting for it until their deadline. Nothing after an
// op's collective started throws c10::Error, so no op takes two turns.
template <typename Start>
c10::intrusive_ptr<c10d::Work> RefusedOnThrow(Client& client, CollectiveKind kind,
                                              const char* op, Start&& start) {
  try {
    return start();
  } catch (const c10::Error& e) {
    client.Refuse(kind, absl::StrCat("torch.", op), e.what_without_backtrace());
    throw;
  }
}

}  // namespace

absl::StatusOr<c10::intrusive_ptr<RingsyncProcessGroup>> RingsyncProcessGroup::Create(
    int rank, int size, const Options& options) {
  ClientOptions client_options;
  client_options.connect_timeout = options.connect_timeout;
  client_options.client_name = absl::StrCat("torch.distributed rank ", rank);
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(options.worker, client_options);
  if (!client.ok()) return client.status();
  if ((*client)->rank() != rank || (*client)->world_size() != size) {
    return absl::FailedPreconditionError(absl::StrCat(
        "torch.distributed says rank ", rank, " of ", size, ", but the ringsync worker at ",
        options.worker, " is rank ", (*client)->rank(), " of ", (*client)->world_size(),
        "; ringsync ranks follow the sorted worker ids, so give rank r the r-th worker"));
  }
  return c10::make_intrusive<RingsyncProcessGroup>(rank, size, *std::move(client), options);
}

RingsyncProcessGroup::RingsyncProcessGroup(int rank, int size, std::unique_ptr<Client> client,
                                           const Options& options)
    : c10d::ProcessGroup(rank, size), options_(options), client_(std::move(client)) {
  init();
}

RingsyncProcessGroup::~RingsyncProcessGroup() {
  // The executor's thread needs the GIL to finish its jobs (a future's Python callbacks;
  // dropping the last reference to a tensor that has a Python object), so a caller that
  // holds it (Python dropping the group, e.g. in destroy_process_group) lets go of it
  // while that thread drains: holding it while joining deadlocked.
  std::optional<pybind11::gil_scoped_release> without_gil;
  if (Py_IsInitialized() && PyGILState_Check()) without_gil.emplace();
  // Cancels what is still in flight, so that the executor drains at once.
  client_.reset();
  completions_.Stop();
}

absl::Duration RingsyncProcessGroup::TimeoutOf(std::chrono::milliseconds op_timeout) const {
  if (op_timeout == c10d::kUnsetTimeout) return options_.collective_timeout;
  return absl::FromChrono(op_timeout);
}

CollectiveOptions RingsyncProcessGroup::OptionsOf(std::chrono::milliseconds op_timeout) const {
  CollectiveOptions options;
  options.timeout = TimeoutOf(op_timeout);
  return options;
}

RingsyncProcessGroup::Reduction RingsyncProcessGroup::ReductionOf(
    const c10d::ReduceOp& reduce_op, std::chrono::milliseconds op_timeout, const char* op) const {
  Reduction reduction;
  std::tie(reduction.op, reduction.options.pre_scale) = RingsyncOpOf(reduce_op, op);
  reduction.options.timeout = TimeoutOf(op_timeout);
  return reduction;
}

c10::intrusive_ptr<c10d::Work> RingsyncProcessGroup::Track(
    c10d::OpType type, const char* what, std::vector<at::Tensor> outputs,
    std::vector<at::Tensor> keep_alive, CollectiveHandle handle, std::function<void()> on_success,
    std::vector<at::Tensor> scratch) {
  keep_alive.insert(keep_alive.end(), scratch.begin(), scratch.end());
  auto work = c10::make_intrusive<CollectiveWork>(getRank(), type, what, std::move(outputs),
                                                  std::move(keep_alive), std::move(handle),
                                                  std::move(on_success));
  completions_.Post([this, work, scratch = std::move(scratch)] {
    work->Complete([&] {
      for (const at::Tensor& t : scratch) scratch_.Give(t);
    });
  });
  return work;
}

at::Tensor RingsyncProcessGroup::ScratchPool::Take(int64_t numel,
                                                   const at::TensorOptions& options,
                                                   Client* client) {
  {
    absl::MutexLock lock(&mu_);
    for (auto it = idle_.begin(); it != idle_.end(); ++it) {
      if (it->numel() == numel && it->scalar_type() == options.dtype().toScalarType()) {
        at::Tensor found = std::move(*it);
        idle_.erase(it);
        return found;
      }
    }
  }
  // Never part of autograd's graph: the ops write into it in place.
  const at::TensorOptions scratch = options.requires_grad(false);
  if (client != nullptr &&
      numel * static_cast<int64_t>(scratch.dtype().itemsize()) >= kMinRegisteredBytes) {
    if (std::optional<at::Tensor> registered = Registered(numel, scratch, *client)) {
      return *std::move(registered);
    }
  }
  return at::empty({numel}, scratch);
}

std::optional<at::Tensor> RingsyncProcessGroup::ScratchPool::Registered(
    int64_t numel, const at::TensorOptions& options, Client& client) {
  if (registered_alive_->fetch_add(1) >= kMaxRegistered) {
    registered_alive_->fetch_sub(1);
    return std::nullopt;
  }
  absl::StatusOr<RegisteredBuffer> buffer =
      client.AllocateBytes(static_cast<size_t>(numel) * options.dtype().itemsize());
  if (!buffer.ok()) {
    registered_alive_->fetch_sub(1);
    return std::nullopt;
  }
  // Owned by the tensor's storage: freed (and unregistered) with it, also after the
  // process group (a buffer that outlives its Client is plain memory).
  auto held = std::make_shared<RegisteredBuffer>(*std::move(buffer));
  void* data = held->data();
  return at::from_blob(
      data, {numel},
      [held, alive = registered_alive_](void*) mutable {
        held.reset();
        alive->fetch_sub(1);
      },
      options);
}

void RingsyncProcessGroup::ScratchPool::Give(at::Tensor tensor) {
  // Freed after the lock: a registered one tells the worker (a round trip).
  std::vector<at::Tensor> evicted;
  absl::MutexLock lock(&mu_);
  idle_.push_back(std::move(tensor));
  int64_t bytes = 0;
  for (const at::Tensor& t : idle_) bytes += t.nbytes();
  while (bytes > kMaxIdleBytes) {
    bytes -= idle_.front().nbytes();
    evicted.push_back(std::move(idle_.front()));
    idle_.erase(idle_.begin());
  }
}

at::Tensor RingsyncProcessGroup::ConcatenatedScratch(const std::vector<at::Tensor>& tensors,
                                                     int64_t room_after) {
  std::vector<at::Tensor> flat;
  int64_t numel = 0;
  for (const at::Tensor& t : tensors) {
    flat.push_back(t.reshape({-1}));
    numel += t.numel();
  }
  at::Tensor out = scratch_.Take(numel + room_after, tensors.front().options(), client_.get());
  at::NoGradGuard no_grad;  // a copy of the values, as the ops read them, not a graph node
  at::Tensor head = out.narrow(0, 0, numel);
  at::cat_out(head, flat);
  return out;
}

c10::intrusive_ptr<c10d::Work> RingsyncProcessGroup::allreduce(
    std::vector<at::Tensor>& tensors, const c10d::AllreduceOptions& opts) {
  return RefusedOnThrow(*client_, CollectiveKind::kAllReduce, "allreduce", [&] {
    at::Tensor& t = OnlyTensor(tensors, "allreduce");
    const DType dtype = DTypeOf(t, "allreduce");
    const Reduction reduction = ReductionOf(opts.reduceOp, opts.timeout, "allreduce");
    CollectiveHandle handle = client_->AllReduceAsync("torch.allreduce", t.data_ptr(), t.numel(),
                                                      dtype, reduction.op, reduction.options);
    return Track(c10d::OpType::ALLREDUCE, "allreduce", tensors, {}, std::move(handle));
  });
}

c10::intrusive_ptr<c10d::Work> RingsyncProcessGroup::broadcast(
    std::vector<at::Tensor>& tensors, const c10d::BroadcastOptions& opts) {
  return RefusedOnThrow(*client_, CollectiveKind::kBroadcast, "broadcast", [&] {
    at::Tensor& t = OnlyTensor(tensors, "broadcast");
    const DType dtype = DTypeOf(t, "broadcast");
    CollectiveHandle handle =
        client_->BroadcastAsync("torch.broadcast", t.data_ptr(), t.numel(), dtype,
                                static_cast<int>(opts.rootRank), OptionsOf(opts.timeout));
    return Track(c10d::OpType::BROADCAST, "broadcast", tensors, {}, std::move(handle));
  });
}

c10::intrusive_ptr<c10d::Work> RingsyncProcessGroup::allgather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  return RefusedOnThrow(*client_, CollectiveKind::kAllGather, "allgather", [&] {
    at::Tensor& input = OnlyTensor(inputs, "allgather");
    const DType dtype = DTypeOf(input, "allgather");
    TORCH_CHECK(outputs.size() == 1, "ringsync allgather: expected one list of output tensors");
    CheckList(outputs[0], getSize(), input, "allgather", "output tensors");
    return AllGatherInto(c10d::OpType::ALLGATHER, "allgather", input, dtype, outputs[0],
                         opts.timeout);
  });
}

c10::intrusive_ptr<c10d::Work> RingsyncProcessGroup::AllGatherInto(
    c10d::OpType type, const char* what, at::Tensor input, DType dtype,
    std::vector<at::Tensor> targets, std::chrono::milliseconds timeout, bool input_is_scratch) {
  // The SDK gathers into one contiguous buffer; the targets may live anywhere.
  at::Tensor flat = scratch_.Take(getSize() * input.numel(), input.options(), client_.get());
  CollectiveHandle handle =
      client_->AllGatherAsync(absl::StrCat("torch.", what), input.data_ptr(), input.numel(), dtype,
                              flat.data_ptr(), flat.numel(), OptionsOf(timeout));
  std::vector<at::Tensor> scratch = {flat};
  if (input_is_scratch) scratch.push_back(input);
  return Track(type, what, targets, {input}, std::move(handle), CopyOut(flat, 0, targets),
               std::move(scratch));
}

c10::intrusive_ptr<c10d::Work> RingsyncProcessGroup::_allgather_base(
    at::Tensor& output, at::Tensor& input, const c10d::AllgatherOptions& opts) {
  return RefusedOnThrow(*client_, CollectiveKind::kAllGather, "allgather", [&] {
    const DType dtype = DTypeOf(input, "allgather");
    TORCH_CHECK(DTypeOf(output, "allgather") == dtype &&
                    output.numel() == getSize() * input.numel(),
                "ringsync allgather: the output must hold world_size x the input, same dtype");
    CollectiveHandle handle = client_->AllGatherAsync("torch.allgather", input.data_ptr(),
                                                      input.numel(), dtype, output.data_ptr(),
                                                      output.numel(), OptionsOf(opts.timeout));
    return Track(c10d::OpType::_ALLGATHER_BASE, "allgather", {output}, {input}, std::move(handle));
  });
}

c10::intrusive_ptr<c10d::Work> RingsyncProcessGroup::barrier(const c10d::BarrierOptions& opts) {
  return Track(c10d::OpType::BARRIER, "barrier", {}, {},
               client_->BarrierAsync("torch.barrier", OptionsOf(opts.timeout)));
}

// Reduce is composed from the daemon's all-reduce, so it moves more bytes than a dedicated
// algorithm would (twice a ring reduce's); gather, scatter and reduce_scatter are the
// daemon's own. Each is one collective, so every rank's result and failure are those of
// that collective.

c10::intrusive_ptr<c10d::Work> RingsyncProcessGroup::reduce(std::vector<at::Tensor>& tensors,
                                                            const c10d::ReduceOptions& opts) {
  return RefusedOnThrow(*client_, CollectiveKind::kAllReduce, "reduce", [&] {
    at::Tensor& t = OnlyTensor(tensors, "reduce");
    const DType dtype = DTypeOf(t, "reduce");
    const int root = RootOf(opts.rootRank, getSize(), "reduce");
    const Reduction reduction = ReductionOf(opts.reduceOp, opts.timeout, "reduce");
    // The other ranks reduce a copy: their tensor stays as it was.
    if (getRank() == root) {
      return Track(c10d::OpType::REDUCE, "reduce", tensors, {},
                   client_->AllReduceAsync("torch.reduce", t.data_ptr(), t.numel(), dtype,
                                           reduction.op, reduction.options));
    }
    at::Tensor copy = ConcatenatedScratch({t});
    CollectiveHandle handle = client_->AllReduceAsync("torch.reduce", copy.data_ptr(), copy.numel(),
                                                      dtype, reduction.op, reduction.options);
    return Track(c10d::OpType::REDUCE, "reduce", tensors, {}, std::move(handle), {}, {copy});
  });
}

c10::intrusive_ptr<c10d::Work> RingsyncProcessGroup::gather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::GatherOptions& opts) {
  return RefusedOnThrow(*client_, CollectiveKind::kGather, "gather", [&] {
    at::Tensor& input = OnlyTensor(inputs, "gather");
    const DType dtype = DTypeOf(input, "gather");
    const int root = RootOf(opts.rootRank, getSize(), "gather");
    const int64_t total = getSize() * input.numel();
    if (getRank() != root) {
      TORCH_CHECK(outputs.empty(), "ringsync gather: only the root (rank ", root,
                  ") passes output tensors");
      // Nothing comes back here: no output, no scratch.
      CollectiveHandle handle =
          client_->GatherAsync("torch.gather", input.data_ptr(), input.numel(), dtype, nullptr,
                               static_cast<size_t>(total), root, OptionsOf(opts.timeout));
      return Track(c10d::OpType::GATHER, "gather", {}, {input}, std::move(handle));
    }
    TORCH_CHECK(outputs.size() == 1, "ringsync gather: the root expects one list of outputs");
    CheckList(outputs[0], getSize(), input, "gather", "output tensors");
    // The SDK gathers into one contiguous buffer; the targets may live anywhere.
    at::Tensor flat = scratch_.Take(total, input.options(), client_.get());
    CollectiveHandle handle =
        client_->GatherAsync("torch.gather", input.data_ptr(), input.numel(), dtype,
                             flat.data_ptr(), static_cast<size_t>(total), root,
                             OptionsOf(opts.timeout));
    return Track(c10d::OpType::GATHER, "gather", outputs[0], {input}, std::move(handle),
                 CopyOut(flat, 0, outputs[0]), {flat});
  });
}

c10::intrusive_ptr<c10d::Work> RingsyncProcessGroup::scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ScatterOptions& opts) {
  return RefusedOnThrow(*client_, CollectiveKind::kScatter, "scatter", [&] {
    at::Tensor& output = OnlyTensor(outputs, "scatter");
    const DType dtype = DTypeOf(output, "scatter");
    const int root = RootOf(opts.rootRank, getSize(), "scatter");
    const size_t total = static_cast<size_t>(getSize() * output.numel());
    if (getRank() != root) {
      TORCH_CHECK(inputs.empty(), "ringsync scatter: only the root (rank ", root,
                  ") passes input tensors");
      // No input here: the block lands in the (contiguous) output.
      CollectiveHandle handle =
          client_->ScatterAsync("torch.scatter", nullptr, total, dtype, output.data_ptr(),
                                output.numel(), root, OptionsOf(opts.timeout));
      return Track(c10d::OpType::SCATTER, "scatter", outputs, {}, std::move(handle));
    }
    TORCH_CHECK(inputs.size() == 1, "ringsync scatter: the root expects one list of inputs");
    CheckList(inputs[0], getSize(), output, "scatter", "input tensors");
    // The list end to end in scratch, its own block the output: the in-place form, which
    // the worker runs where registered scratch lies. The root's own block never leaves it,
    // so it goes straight into the output (one copy, where through the scratch it would
    // be two) and its place in the scratch is left as it is.
    const int64_t numel = output.numel();
    at::Tensor flat = scratch_.Take(static_cast<int64_t>(total), output.options(), client_.get());
    {
      at::NoGradGuard no_grad;  // copies of the values, as the ops read them
      for (int r = 0; r < getSize(); ++r) {
        const at::Tensor& piece = inputs[0][static_cast<size_t>(r)];
        if (r == root) {
          output.view(-1).copy_(piece.reshape(-1));  // same count, maybe another shape
        } else {
          flat.narrow(0, r * numel, numel).view(piece.sizes()).copy_(piece);
        }
      }
    }
    CollectiveHandle handle = client_->ScatterAsync(
        "torch.scatter", flat.data_ptr(), total, dtype,
        static_cast<std::byte*>(flat.data_ptr()) + root * numel * flat.element_size(), numel,
        root, OptionsOf(opts.timeout));
    return Track(c10d::OpType::SCATTER, "scatter", outputs, {}, std::move(handle), {}, {flat});
  });
}

c10::intrusive_ptr<c10d::Work> RingsyncProcessGroup::reduce_scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  return RefusedOnThrow(*client_, CollectiveKind::kReduceScatter, "reduce_scatter", [&] {
    at::Tensor& output = OnlyTensor(outputs, "reduce_scatter");
    const DType dtype = DTypeOf(output, "reduce_scatter");
    TORCH_CHECK(inputs.size() == 1, "ringsync reduce_scatter: expected one list of inputs");
    CheckList(inputs[0], getSize(), output, "reduce_scatter", "input tensors");
    return ReduceScatterOf(ConcatenatedScratch(inputs[0]), /*input_is_scratch=*/true, output,
                           dtype, opts, c10d::OpType::REDUCE_SCATTER);
  });
}

c10::intrusive_ptr<c10d::Work> RingsyncProcessGroup::_reduce_scatter_base(
    at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) {
  return RefusedOnThrow(*client_, CollectiveKind::kReduceScatter, "reduce_scatter", [&] {
    const DType dtype = DTypeOf(output, "reduce_scatter");
    TORCH_CHECK(DTypeOf(input, "reduce_scatter") == dtype &&
                    input.numel() == getSize() * output.numel(),
                "ringsync reduce_scatter: the input must hold world_size x the output, same dtype");
    if (input.is_contiguous()) {
      return ReduceScatterOf(input, /*input_is_scratch=*/false, output, dtype, opts,
                             c10d::OpType::_REDUCE_SCATTER_BASE);
    }
    return ReduceScatterOf(ConcatenatedScratch({input}), /*input_is_scratch=*/true, output, dtype,
                           opts, c10d::OpType::_REDUCE_SCATTER_BASE);
  });
}

c10::intrusive_ptr<c10d::Work> RingsyncProcessGroup::ReduceScatterOf(
    at::Tensor flat, bool input_is_scratch, at::Tensor output, DType dtype,
    const c10d::ReduceScatterOptions& opts, c10d::OpType type) {
  const Reduction reduction = ReductionOf(opts.reduceOp, opts.timeout, "reduce_scatter");
  if (input_is_scratch) {
    // The input is ours to overwrite: the in-place form (the output is this rank's block of
    // it), which the worker runs where registered scratch lies, then the block copied out.
    const int64_t at = getRank() * output.numel();
    CollectiveHandle handle = client_->ReduceScatterAsync(
        "torch.reduce_scatter", flat.data_ptr(), flat.numel(), dtype,
        static_cast<std::byte*>(flat.data_ptr()) + at * flat.element_size(), output.numel(),
        reduction.op, reduction.options);
    return Track(type, "reduce_scatter", {output}, {}, std::move(handle),
                 CopyOut(flat, at, {output}), {flat});
  }
  // The SDK writes the block straight into a contiguous output.
  const bool direct = output.is_contiguous();
  at::Tensor block = direct ? output : scratch_.Take(output.numel(), output.options(), nullptr);
  CollectiveHandle handle = client_->ReduceScatterAsync(
      "torch.reduce_scatter", flat.data_ptr(), flat.numel(), dtype, block.data_ptr(),
      block.numel(), reduction.op, reduction.options);
  std::vector<at::Tensor> scratch;
  if (!direct) scratch.push_back(block);
  return Track(type, "reduce_scatter", {output}, {flat}, std::move(handle),
               direct ? std::function<void()>() : CopyOut(block, 0, {output}),
               std::move(scratch));
}

c10::intrusive_ptr<c10d::Work> RingsyncProcessGroup::allreduce_coalesced(
    std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) {
  return RefusedOnThrow(*client_, CollectiveKind::kAllReduce, "allreduce_coalesced", [&] {
    TORCH_CHECK(!tensors.empty(), "ringsync allreduce_coalesced: no tensors");
    const DType dtype = DTypeOf(tensors[0], "allreduce_coalesced");
    std::vector<GroupTensor> members;
    for (size_t i = 0; i < tensors.size(); ++i) {
      TORCH_CHECK(DTypeOf(tensors[i], "allreduce_coalesced") == dtype,
                  "ringsync allreduce_coalesced: every tensor must have the first's dtype (",
                  tensors[0].scalar_type(), "); tensor ", i, " is ", tensors[i].scalar_type());
      members.push_back({absl::StrCat("torch.allreduce_coalesced[", i, "]"),
                         tensors[i].data_ptr(), static_cast<size_t>(tensors[i].numel()), dtype});
    }
    const Reduction reduction = ReductionOf(opts.reduceOp, opts.timeout, "allreduce_coalesced");
    // One collective for all of them (the SDK's group: packed, reduced, copied back).
    CollectiveHandle handle =
        client_->AllReduceGroupAsync(members, reduction.op, reduction.options);
    return Track(c10d::OpType::ALLREDUCE_COALESCED, "allreduce_coalesced", tensors, {},
                 std::move(handle));
  });
}

c10::intrusive_ptr<c10d::Work> RingsyncProcessGroup::allgather_coalesced(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  return RefusedOnThrow(*client_, CollectiveKind::kAllGather, "allgather_coalesced", [&] {
    TORCH_CHECK(!inputs.empty(), "ringsync allgather_coalesced: no input tensors");
    const DType dtype = DTypeOf(inputs[0], "allgather_coalesced");
    for (const at::Tensor& input : inputs) {
      TORCH_CHECK(input.device().is_cpu() && input.scalar_type() == inputs[0].scalar_type(),
                  "ringsync allgather_coalesced: every input must be a CPU tensor of the first's "
                  "dtype (", inputs[0].scalar_type(), ")");
    }
    TORCH_CHECK(static_cast<int>(outputs.size()) == getSize(), "ringsync allgather_coalesced: "
                "expected ", getSize(), " lists of outputs (one per rank), got ", outputs.size());
    std::vector<at::Tensor> targets;
    for (const std::vector<at::Tensor>& of_rank : outputs) {
      TORCH_CHECK(of_rank.size() == inputs.size(), "ringsync allgather_coalesced: each rank's "
                  "list of outputs must match the ", inputs.size(), " inputs");
      for (size_t j = 0; j < inputs.size(); ++j) {
        CheckLike(of_rank[j], inputs[j], "allgather_coalesced", "output tensors");
      }
      targets.insert(targets.end(), of_rank.begin(), of_rank.end());
    }
    // Every rank's inputs end to end, gathered as one block per rank.
    return AllGatherInto(c10d::OpType::ALLGATHER_COALESCED, "allgather_coalesced",
                         ConcatenatedScratch(inputs), dtype, targets, opts.timeout,
                         /*input_is_scratch=*/true);
  });
}

namespace {

// all_to_all_single's split sizes (rows of the first dimension per rank; none: an equal
// share) in elements per rank.
std::vector<uint64_t> ElementsPerRank(const std::vector<int64_t>& splits, const at::Tensor& t,
                                      int size, const char* what) {
  TORCH_CHECK(t.dim() > 0, "ringsync alltoall: split sizes count rows of the first dimension; "
              "the ", what, " has none");
  const int64_t rows = t.size(0);
  const int64_t row = rows == 0 ? 0 : t.numel() / rows;
  std::vector<uint64_t> counts;
  if (splits.empty()) {
    TORCH_CHECK(rows % size == 0, "ringsync alltoall: the ", what, " has ", rows,
                " rows, not an equal share for each of ", size, " ranks; pass its split sizes");
    counts.assign(static_cast<size_t>(size), static_cast<uint64_t>(rows / size * row));
    return counts;
  }
  TORCH_CHECK(static_cast<int>(splits.size()) == size, "ringsync alltoall: ", splits.size(),
              " ", what, " split sizes for ", size, " ranks");
  int64_t total = 0;
  for (int64_t split : splits) {
    TORCH_CHECK(split >= 0, "ringsync alltoall: a negative ", what, " split size");
    total += split;
    counts.push_back(static_cast<uint64_t>(split * row));
  }
  TORCH_CHECK(total == rows, "ringsync alltoall: the ", what, " split sizes add up to ", total,
              " rows; the ", what, " has ", rows);
  return counts;
}

bool AllOf(const std::vector<at::Tensor>& tensors, int64_t numel) {
  for (const at::Tensor& t : tensors) {
    if (t.numel() != numel) return false;
  }
  return true;
}

}  // namespace

c10::intrusive_ptr<c10d::Work> RingsyncProcessGroup::alltoall_base(
    at::Tensor& output, at::Tensor& input, std::vector<int64_t>& output_splits,
    std::vector<int64_t>& input_splits, const c10d::AllToAllOptions& opts) {
  return RefusedOnThrow(*client_, CollectiveKind::kAllToAll, "alltoall", [&] {
    const DType dtype = DTypeOf(input, "alltoall");
    TORCH_CHECK(DTypeOf(output, "alltoall") == dtype, "ringsync alltoall: the output must be of "
                "the input's dtype");
    CollectiveHandle handle;
    if (input_splits.empty() && output_splits.empty()) {
      TORCH_CHECK(output.numel() == input.numel(), "ringsync alltoall: without split sizes the "
                  "output must hold as many elements as the input");
      handle = client_->AllToAllAsync("torch.alltoall", input.data_ptr(), input.numel(), dtype,
                                      output.data_ptr(), output.numel(), OptionsOf(opts.timeout));
    } else {
      // Uneven (or given) splits: MPI_Alltoallv's form, each rank's sizes its own.
      handle = client_->AllToAllVAsync(
          "torch.alltoall", input.data_ptr(), input.numel(),
          ElementsPerRank(input_splits, input, getSize(), "input"), dtype, output.data_ptr(),
          output.numel(), ElementsPerRank(output_splits, output, getSize(), "output"),
          OptionsOf(opts.timeout));
    }
    return Track(c10d::OpType::ALLTOALL_BASE, "alltoall", {output}, {input}, std::move(handle));
  });
}

c10::intrusive_ptr<c10d::Work> RingsyncProcessGroup::alltoall(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllToAllOptions& opts) {
  return RefusedOnThrow(*client_, CollectiveKind::kAllToAll, "alltoall", [&] {
    TORCH_CHECK(!inputs.empty(), "ringsync alltoall: no input tensors");
    const DType dtype = DTypeOf(inputs[0], "alltoall");
    if (AllOf(inputs, inputs[0].numel()) && AllOf(outputs, inputs[0].numel())) {
      CheckList(inputs, getSize(), inputs[0], "alltoall", "input tensors");
      CheckList(outputs, getSize(), inputs[0], "alltoall", "output tensors");
      // The inputs end to end in scratch, exchanged there in place (registered scratch
      // runs in the worker's own view of it), then copied out to the outputs.
      at::Tensor flat = ConcatenatedScratch(inputs);
      CollectiveHandle handle =
          client_->AllToAllAsync("torch.alltoall", flat.data_ptr(), flat.numel(), dtype,
                                 flat.data_ptr(), flat.numel(), OptionsOf(opts.timeout));
      return Track(c10d::OpType::ALLTOALL, "alltoall", outputs, {}, std::move(handle),
                   CopyOut(flat, 0, outputs), {flat});
    }
    // Tensors of different sizes: an uneven all-to-all, the inputs end to end in scratch
    // with room for the outputs after them (in place where the scratch is registered).
    TORCH_CHECK(static_cast<int>(inputs.size()) == getSize() &&
                    static_cast<int>(outputs.size()) == getSize(),
                "ringsync alltoall: expected ", getSize(), " input and output tensors, got ",
                inputs.size(), " and ", outputs.size());
    std::vector<uint64_t> sends;
    std::vector<uint64_t> receives;
    int64_t in = 0;
    int64_t out = 0;
    for (int r = 0; r < getSize(); ++r) {
      TORCH_CHECK(outputs[r].scalar_type() == inputs[0].scalar_type() &&
                      inputs[r].scalar_type() == inputs[0].scalar_type() &&
                      inputs[r].device().is_cpu() && outputs[r].device().is_cpu(),
                  "ringsync alltoall: every input and output tensor must be a CPU tensor of the "
                  "first input's dtype");
      sends.push_back(static_cast<uint64_t>(inputs[r].numel()));
      receives.push_back(static_cast<uint64_t>(outputs[r].numel()));
      in += inputs[r].numel();
      out += outputs[r].numel();
    }
    at::Tensor both = ConcatenatedScratch(inputs, /*room_after=*/out);
    auto* base = static_cast<std::byte*>(both.data_ptr());
    CollectiveHandle handle = client_->AllToAllVAsync(
        "torch.alltoall", base, static_cast<size_t>(in), sends, dtype,
        base + in * static_cast<int64_t>(DTypeSize(dtype)), static_cast<size_t>(out), receives,
        OptionsOf(opts.timeout));
    return Track(c10d::OpType::ALLTOALL, "alltoall", outputs, {}, std::move(handle),
                 CopyOut(both, in, outputs), {both});
  });
}

// clang-format off
c10::intrusive_ptr<c10d::Work> RingsyncProcessGroup::send(std::vector<at::Tensor>&, int, int) { Unsupported("send"); }
c10::intrusive_ptr<c10d::Work> RingsyncProcessGroup::recv(std::vector<at::Tensor>&, int, int) { Unsupported("recv"); }
c10::intrusive_ptr<c10d::Work> RingsyncProcessGroup::recvAnysource(std::vector<at::Tensor>&, int) { Unsupported("recv"); }
// clang-format on

}  // namespace ringsync::python
