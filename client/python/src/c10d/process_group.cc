#include "client/python/src/c10d/process_group.h"

#include <utility>

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

struct Reduction {
  ReduceOp op;
  double pre_scale = 1.0;
};

Reduction ReductionOf(const c10d::ReduceOp& reduce_op) {
  switch (static_cast<c10d::ReduceOp::RedOpType>(reduce_op)) {
    case c10d::ReduceOp::SUM: return {ReduceOp::kSum};
    case c10d::ReduceOp::AVG: return {ReduceOp::kAvg};
    case c10d::ReduceOp::PRODUCT: return {ReduceOp::kProd};
    case c10d::ReduceOp::MIN: return {ReduceOp::kMin};
    case c10d::ReduceOp::MAX: return {ReduceOp::kMax};
    case c10d::ReduceOp::PREMUL_SUM: {
      // A scalar factor is ringsync's pre_scale; a tensor factor has no counterpart.
      const auto* supplement =
          dynamic_cast<const c10d::NCCLPreMulSumSupplement*>(reduce_op.supplement_.get());
      TORCH_CHECK(supplement != nullptr && supplement->tensor_factors.empty(),
                  "ringsync allreduce: PREMUL_SUM takes a scalar factor only");
      return {ReduceOp::kSum, supplement->double_factor};
    }
    default:
      TORCH_CHECK(false, "ringsync allreduce: the bitwise ops (BAND, BOR, BXOR) are not "
                  "ringsync ops; it has SUM, AVG, PRODUCT, MIN, MAX and PREMUL_SUM");
  }
}

[[noreturn]] c10::intrusive_ptr<c10d::Work> Unsupported(const char* op) {
  TORCH_CHECK(false, "the ringsync backend has no ", op,
              " (it has allreduce, broadcast, allgather and barrier); for ", op,
              " create a second group with dist.new_group(backend=\"gloo\")");
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
  // Cancels what is still in flight, so that completions_ (destroyed next) drains at once.
  client_.reset();
}

absl::Duration RingsyncProcessGroup::TimeoutOf(std::chrono::milliseconds op_timeout) const {
  if (op_timeout == c10d::kUnsetTimeout) return options_.collective_timeout;
  return absl::FromChrono(op_timeout);
}

c10::intrusive_ptr<c10d::Work> RingsyncProcessGroup::Track(
    c10d::OpType type, const char* what, std::vector<at::Tensor> outputs,
    std::vector<at::Tensor> keep_alive, CollectiveHandle handle, std::function<void()> on_success) {
  auto work = c10::make_intrusive<CollectiveWork>(getRank(), type, what, std::move(outputs),
                                                  std::move(keep_alive), std::move(handle),
                                                  std::move(on_success));
  completions_.Post([work] { work->Complete(); });
  return work;
}

c10::intrusive_ptr<c10d::Work> RingsyncProcessGroup::allreduce(
    std::vector<at::Tensor>& tensors, const c10d::AllreduceOptions& opts) {
  at::Tensor& t = OnlyTensor(tensors, "allreduce");
  const DType dtype = DTypeOf(t, "allreduce");
  const Reduction reduction = ReductionOf(opts.reduceOp);
  AllReduceOptions options;
  options.pre_scale = reduction.pre_scale;
  options.timeout = TimeoutOf(opts.timeout);
  CollectiveHandle handle = client_->AllReduceAsync("torch.allreduce", t.data_ptr(), t.numel(),
                                                    dtype, reduction.op, options);
  return Track(c10d::OpType::ALLREDUCE, "allreduce", tensors, {}, std::move(handle));
}

c10::intrusive_ptr<c10d::Work> RingsyncProcessGroup::broadcast(
    std::vector<at::Tensor>& tensors, const c10d::BroadcastOptions& opts) {
  at::Tensor& t = OnlyTensor(tensors, "broadcast");
  const DType dtype = DTypeOf(t, "broadcast");
  CollectiveOptions options;
  options.timeout = TimeoutOf(opts.timeout);
  CollectiveHandle handle = client_->BroadcastAsync("torch.broadcast", t.data_ptr(), t.numel(),
                                                    dtype, static_cast<int>(opts.rootRank), options);
  return Track(c10d::OpType::BROADCAST, "broadcast", tensors, {}, std::move(handle));
}

c10::intrusive_ptr<c10d::Work> RingsyncProcessGroup::allgather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  at::Tensor& input = OnlyTensor(inputs, "allgather");
  const DType dtype = DTypeOf(input, "allgather");
  TORCH_CHECK(outputs.size() == 1 && static_cast<int>(outputs[0].size()) == getSize(),
              "ringsync allgather: expected one list of ", getSize(), " output tensors");
  for (const at::Tensor& out : outputs[0]) {
    TORCH_CHECK(out.numel() == input.numel() && out.scalar_type() == input.scalar_type(),
                "ringsync allgather: every output tensor must have the input's size and dtype");
  }
  // The SDK gathers into one contiguous buffer; the outputs may live anywhere.
  at::Tensor flat = at::empty({getSize() * input.numel()}, input.options());
  CollectiveOptions options;
  options.timeout = TimeoutOf(opts.timeout);
  CollectiveHandle handle = client_->AllGatherAsync("torch.allgather", input.data_ptr(),
                                                    input.numel(), dtype, flat.data_ptr(),
                                                    flat.numel(), options);
  std::vector<at::Tensor> targets = outputs[0];
  auto scatter_back = [flat, targets, n = input.numel()] {
    for (size_t i = 0; i < targets.size(); ++i) {
      at::Tensor target = targets[i];
      target.copy_(flat.narrow(0, static_cast<int64_t>(i) * n, n).view(target.sizes()));
    }
  };
  return Track(c10d::OpType::ALLGATHER, "allgather", targets, {input, flat}, std::move(handle),
               std::move(scatter_back));
}

c10::intrusive_ptr<c10d::Work> RingsyncProcessGroup::_allgather_base(
    at::Tensor& output, at::Tensor& input, const c10d::AllgatherOptions& opts) {
  const DType dtype = DTypeOf(input, "allgather");
  TORCH_CHECK(DTypeOf(output, "allgather") == dtype && output.numel() == getSize() * input.numel(),
              "ringsync allgather: the output must hold world_size x the input, same dtype");
  CollectiveOptions options;
  options.timeout = TimeoutOf(opts.timeout);
  CollectiveHandle handle = client_->AllGatherAsync("torch.allgather", input.data_ptr(),
                                                    input.numel(), dtype, output.data_ptr(),
                                                    output.numel(), options);
  return Track(c10d::OpType::_ALLGATHER_BASE, "allgather", {output}, {input}, std::move(handle));
}

c10::intrusive_ptr<c10d::Work> RingsyncProcessGroup::barrier(const c10d::BarrierOptions& opts) {
  CollectiveOptions options;
  options.timeout = TimeoutOf(opts.timeout);
  return Track(c10d::OpType::BARRIER, "barrier", {}, {},
               client_->BarrierAsync("torch.barrier", options));
}

// clang-format off
c10::intrusive_ptr<c10d::Work> RingsyncProcessGroup::allreduce_coalesced(std::vector<at::Tensor>&, const c10d::AllreduceCoalescedOptions&) { Unsupported("allreduce_coalesced"); }
c10::intrusive_ptr<c10d::Work> RingsyncProcessGroup::reduce(std::vector<at::Tensor>&, const c10d::ReduceOptions&) { Unsupported("reduce"); }
c10::intrusive_ptr<c10d::Work> RingsyncProcessGroup::allgather_coalesced(std::vector<std::vector<at::Tensor>>&, std::vector<at::Tensor>&, const c10d::AllgatherOptions&) { Unsupported("allgather_coalesced"); }
c10::intrusive_ptr<c10d::Work> RingsyncProcessGroup::gather(std::vector<std::vector<at::Tensor>>&, std::vector<at::Tensor>&, const c10d::GatherOptions&) { Unsupported("gather"); }
c10::intrusive_ptr<c10d::Work> RingsyncProcessGroup::scatter(std::vector<at::Tensor>&, std::vector<std::vector<at::Tensor>>&, const c10d::ScatterOptions&) { Unsupported("scatter"); }
c10::intrusive_ptr<c10d::Work> RingsyncProcessGroup::reduce_scatter(std::vector<at::Tensor>&, std::vector<std::vector<at::Tensor>>&, const c10d::ReduceScatterOptions&) { Unsupported("reduce_scatter"); }
c10::intrusive_ptr<c10d::Work> RingsyncProcessGroup::_reduce_scatter_base(at::Tensor&, at::Tensor&, const c10d::ReduceScatterOptions&) { Unsupported("reduce_scatter"); }
c10::intrusive_ptr<c10d::Work> RingsyncProcessGroup::alltoall_base(at::Tensor&, at::Tensor&, std::vector<int64_t>&, std::vector<int64_t>&, const c10d::AllToAllOptions&) { Unsupported("alltoall"); }
c10::intrusive_ptr<c10d::Work> RingsyncProcessGroup::alltoall(std::vector<at::Tensor>&, std::vector<at::Tensor>&, const c10d::AllToAllOptions&) { Unsupported("alltoall"); }
c10::intrusive_ptr<c10d::Work> RingsyncProcessGroup::send(std::vector<at::Tensor>&, int, int) { Unsupported("send"); }
c10::intrusive_ptr<c10d::Work> RingsyncProcessGroup::recv(std::vector<at::Tensor>&, int, int) { Unsupported("recv"); }
c10::intrusive_ptr<c10d::Work> RingsyncProcessGroup::recvAnysource(std::vector<at::Tensor>&, int) { Unsupported("recv"); }
// clang-format on

}  // namespace ringsync::python
