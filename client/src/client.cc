// ringsync::Client: each call describes its collective and hands it to ClientCore.
#include "ringsync/client.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "client/src/client_core.h"
#include "core/sync/steady_deadline.h"
#include "client/src/fused_call.h"
#include "client/src/pending_collective.h"
#include "core/collective.h"

namespace ringsync {
namespace {

using internal::CollectiveCall;

CollectiveCall MakeCall(CollectiveKind kind, absl::string_view name, DType dtype, size_t count,
                        absl::Duration timeout) {
  CollectiveCall call;
  call.spec.kind = kind;
  call.spec.name = std::string(name);
  call.spec.dtype = dtype;
  call.spec.count = count;
  call.timeout = timeout;
  return call;
}

CollectiveCall MakeReduction(CollectiveKind kind, absl::string_view name, DType dtype,
                             size_t count, ReduceOp op, const AllReduceOptions& options) {
  CollectiveCall call = MakeCall(kind, name, dtype, count, options.timeout);
  call.spec.op = op;
  call.spec.pre_scale = options.pre_scale;
  call.spec.post_scale = options.post_scale;
  return call;
}

// `call` reading `input` and writing its `output_count` elements of result to `output`.
CollectiveCall WithBuffers(CollectiveCall call, const void* input, void* output,
                           size_t output_count) {
  call.input = input;
  call.output = output;
  call.output_count = output_count;
  return call;
}

// As WithBuffers, for a collective whose data comes from or goes to `root`.
CollectiveCall Rooted(CollectiveCall call, int root, const void* input, void* output,
                      size_t output_count) {
  call.spec.root = root;
  return WithBuffers(std::move(call), input, output, output_count);
}

}  // namespace

Client::Client(std::unique_ptr<internal::ClientCore> core) : core_(std::move(core)) {}
Client::~Client() = default;

absl::StatusOr<std::unique_ptr<Client>> Client::Connect(absl::string_view target,
                                                        const ClientOptions& options) {
  absl::StatusOr<std::unique_ptr<internal::ClientCore>> core =
      internal::ClientCore::Connect(target, options);
  if (!core.ok()) return core.status();
  return std::unique_ptr<Client>(new Client(*std::move(core)));
}

int Client::rank() const { return core_->info().rank(); }
int Client::world_size() const { return core_->info().world_size(); }
uint64_t Client::generation() const { return core_->info().generation(); }
bool Client::ready() const { return core_->ready(); }

absl::Status Client::AwaitRing(absl::Duration timeout) {
  absl::Status ready = core_->AwaitReady(SteadyDeadline(timeout), timeout,
                                         "the timeout given to Client::AwaitRing");
  if (!ready.ok() && !core_->attached()) {
    // No ring will ever come to this Client: not a wait to repeat.
    return absl::FailedPreconditionError(
        absl::StrCat(ready.message(), "; this Client is detached: connect a new one"));
  }
  return ready;
}

absl::StatusOr<RegisteredBuffer> Client::AllocateBytes(size_t size_bytes) {
  return core_->Allocate(size_bytes);
}

size_t Client::ReleaseIdleMemory() { return core_->ReleaseIdleMemory(); }

absl::Status Client::AllReduce(absl::string_view name, void* data, size_t count, DType dtype,
                               ReduceOp op, const AllReduceOptions& options) {
  return AllReduceAsync(name, data, count, dtype, op, options).Wait();
}

CollectiveHandle Client::AllReduceAsync(absl::string_view name, void* data, size_t count,
                                        DType dtype, ReduceOp op, const AllReduceOptions& options) {
  return core_->Start(WithBuffers(
      MakeReduction(CollectiveKind::kAllReduce, name, dtype, count, op, options), data, data,
      count));
}

absl::Status Client::AllReduceGroup(absl::Span<const GroupTensor> tensors, ReduceOp op,
                                    const AllReduceOptions& options) {
  return AllReduceGroupAsync(tensors, op, options).Wait();
}

CollectiveHandle Client::AllReduceGroupAsync(absl::Span<const GroupTensor> tensors, ReduceOp op,
                                             const AllReduceOptions& options) {
  absl::StatusOr<CollectiveCall> call = internal::MakeFusedCall(tensors, op, options);
  if (call.ok()) return core_->Start(*std::move(call));
  // The other ranks still expect this rank's collective: it takes its turn, refused.
  CollectiveCall refused = MakeCall(CollectiveKind::kAllReduce,
                                    absl::StrCat("grouped all-reduce of ", tensors.size(), " tensors"),
                                    tensors.empty() ? DType::kFloat32 : tensors.front().dtype, 0,
                                    options.timeout);
  refused.spec.op = op;
  return core_->Refuse(std::move(refused), call.status());
}

absl::Status Client::Broadcast(absl::string_view name, void* data, size_t count, DType dtype,
                               int root, const CollectiveOptions& options) {
  return BroadcastAsync(name, data, count, dtype, root, options).Wait();
}

CollectiveHandle Client::BroadcastAsync(absl::string_view name, void* data, size_t count,
                                        DType dtype, int root, const CollectiveOptions& options) {
  return core_->Start(
      Rooted(MakeCall(CollectiveKind::kBroadcast, name, dtype, count, options.timeout), root, data,
             data, count));
}

absl::Status Client::AllGather(absl::string_view name, const void* input, size_t input_count,
                               DType dtype, void* output, size_t output_count,
                               const CollectiveOptions& options) {
  return AllGatherAsync(name, input, input_count, dtype, output, output_count, options).Wait();
}

CollectiveHandle Client::AllGatherAsync(absl::string_view name, const void* input,
                                        size_t input_count, DType dtype, void* output,
                                        size_t output_count, const CollectiveOptions& options) {
  return core_->Start(
      WithBuffers(MakeCall(CollectiveKind::kAllGather, name, dtype, input_count, options.timeout),
                  input, output, output_count));
}

absl::Status Client::ReduceScatter(absl::string_view name, const void* input, size_t input_count,
                                   DType dtype, void* output, size_t output_count, ReduceOp op,
                                   const AllReduceOptions& options) {
  return ReduceScatterAsync(name, input, input_count, dtype, output, output_count, op, options)
      .Wait();
}

CollectiveHandle Client::ReduceScatterAsync(absl::string_view name, const void* input,
                                            size_t input_count, DType dtype, void* output,
                                            size_t output_count, ReduceOp op,
                                            const AllReduceOptions& options) {
  return core_->Start(WithBuffers(
      MakeReduction(CollectiveKind::kReduceScatter, name, dtype, input_count, op, options), input,
      output, output_count));
}

absl::Status Client::Scatter(absl::string_view name, const void* input, size_t input_count,
                             DType dtype, void* output, size_t output_count, int root,
                             const CollectiveOptions& options) {
  return ScatterAsync(name, input, input_count, dtype, output, output_count, root, options).Wait();
}

CollectiveHandle Client::ScatterAsync(absl::string_view name, const void* input,
                                      size_t input_count, DType dtype, void* output,
                                      size_t output_count, int root,
                                      const CollectiveOptions& options) {
  return core_->Start(
      Rooted(MakeCall(CollectiveKind::kScatter, name, dtype, input_count, options.timeout), root,
             input, output, output_count));
}

absl::Status Client::Gather(absl::string_view name, const void* input, size_t input_count,
                            DType dtype, void* output, size_t output_count, int root,
                            const CollectiveOptions& options) {
  return GatherAsync(name, input, input_count, dtype, output, output_count, root, options).Wait();
}

CollectiveHandle Client::GatherAsync(absl::string_view name, const void* input,
                                     size_t input_count, DType dtype, void* output,
                                     size_t output_count, int root,
                                     const CollectiveOptions& options) {
  return core_->Start(
      Rooted(MakeCall(CollectiveKind::kGather, name, dtype, input_count, options.timeout), root,
             input, output, output_count));
}

absl::Status Client::AllToAll(absl::string_view name, const void* input, size_t input_count,
                              DType dtype, void* output, size_t output_count,
                              const CollectiveOptions& options) {
  return AllToAllAsync(name, input, input_count, dtype, output, output_count, options).Wait();
}

CollectiveHandle Client::AllToAllAsync(absl::string_view name, const void* input,
                                       size_t input_count, DType dtype, void* output,
                                       size_t output_count, const CollectiveOptions& options) {
  return core_->Start(
      WithBuffers(MakeCall(CollectiveKind::kAllToAll, name, dtype, input_count, options.timeout),
                  input, output, output_count));
}

absl::Status Client::AllToAllV(absl::string_view name, const void* input, size_t input_count,
                               absl::Span<const uint64_t> send_counts, DType dtype, void* output,
                               size_t output_count, absl::Span<const uint64_t> receive_counts,
                               const CollectiveOptions& options) {
  return AllToAllVAsync(name, input, input_count, send_counts, dtype, output, output_count,
                        receive_counts, options)
      .Wait();
}

CollectiveHandle Client::AllToAllVAsync(absl::string_view name, const void* input,
                                        size_t input_count, absl::Span<const uint64_t> send_counts,
                                        DType dtype, void* output, size_t output_count,
                                        absl::Span<const uint64_t> receive_counts,
                                        const CollectiveOptions& options) {
  // The call's checks (ValidateCall) say when the counts do not add up to the buffers.
  CollectiveCall call = WithBuffers(
      MakeCall(CollectiveKind::kAllToAll, name, dtype, input_count, options.timeout), input,
      output, output_count);
  call.spec.send_counts.assign(send_counts.begin(), send_counts.end());
  call.spec.receive_counts.assign(receive_counts.begin(), receive_counts.end());
  return core_->Start(std::move(call));
}

absl::Status Client::Barrier(absl::string_view name, const CollectiveOptions& options) {
  return BarrierAsync(name, options).Wait();
}

CollectiveHandle Client::BarrierAsync(absl::string_view name, const CollectiveOptions& options) {
  // No data; the dtype only has to be a valid one for the worker's checks.
  return core_->Start(MakeCall(CollectiveKind::kBarrier, name, DType::kUInt8, 0, options.timeout));
}

CollectiveHandle Client::Refuse(CollectiveKind kind, absl::string_view name,
                                absl::string_view why, const CollectiveOptions& options) {
  // The worker quotes at most 4 KiB of a refusal; the rest would only fill the request.
  constexpr size_t kMaxReason = 4096;
  if (!IsValid(kind)) {
    // No turn to take: no rank runs a collective of no kind.
    return internal::PendingCollective::MakeHandle(internal::PendingCollective::CompletedState(
        absl::InvalidArgumentError(absl::StrCat("Refuse: ", static_cast<int>(kind),
                                                " is not a collective kind"))));
  }
  return core_->Refuse(MakeCall(kind, name, DType::kUInt8, 0, options.timeout),
                       absl::InvalidArgumentError(why.empty() ? "refused by its caller"
                                                              : why.substr(0, kMaxReason)));
}

}  // namespace ringsync
