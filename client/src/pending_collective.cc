#include "client/src/pending_collective.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "client/src/registered_buffer_state.h"
#include "core/ring/schedule.h"
#include "core/sync/wait_limit.h"
#include "spdlog/spdlog.h"

namespace ringsync::internal {

CollectiveHandle PendingCollective::Completed(absl::Status status) {
  return MakeHandle(CompletedState(std::move(status)));
}

std::shared_ptr<PendingCollective> PendingCollective::CompletedState(absl::Status status) {
  auto pending = std::make_shared<PendingCollective>(CollectiveCall{}, CallBytes{});
  pending->Complete(std::move(status));
  return pending;
}

CollectiveHandle PendingCollective::MakeHandle(std::shared_ptr<PendingCollective> pending) {
  return CollectiveHandle(std::move(pending));
}

PendingCollective::PendingCollective(CollectiveCall call, CallBytes bytes)
    : call_(std::move(call)), bytes_(bytes) {}

void PendingCollective::PrepareData(std::shared_ptr<SharedMemoryPool> pool) {
  // Nothing to carry (a barrier, a count of 0): the request names no data at all.
  if (bytes_.input == 0 && bytes_.output == 0) return;
  if (pool != nullptr) {
    absl::StatusOr<SharedMemoryRegion> region = pool->Acquire(bytes_.buffer());
    if (region.ok()) {
      // AllGather: this rank's input at the start; the worker writes the gathered result
      // over the first bytes_.buffer() bytes of the (possibly larger, reused) region.
      if (bytes_.input > 0) FillStaged(static_cast<char*>(region->data()));
      v1::SharedTensor* shared = request_.mutable_shared();
      shared->set_path(region->path());
      shared->set_offset(0);
      shared->set_size_bytes(bytes_.buffer());
      shared->set_reuse(true);
      region_ = *std::move(region);
      pool_ = std::move(pool);
      return;
    }
    static std::atomic<bool> warned{false};
    if (!warned.exchange(true)) {
      spdlog::warn("ringsync: {}: no shared memory in {} ({}); sending tensors inline instead",
                   DescribeCall(call_), pool->directory(), std::string(region.status().message()));
    }
  }
  std::string* inline_data = request_.mutable_inline_data();  // selects inline even when empty
  if (leave_input_out_ && call_.spec.kind == CollectiveKind::kScatter) {
    // The worker makes the ring's room itself: nothing of this rank's is read.
    request_.set_input_left_out(true);
    return;
  }
  if (bytes_.input > 0) {
    inline_data->resize(bytes_.input);
    GatherInput(inline_data->data());
  }
}

void PendingCollective::FillStaged(char* to) {
  if (leave_input_out_) {
    request_.set_input_left_out(true);
    return;
  }
  GatherInput(to);
}

void PendingCollective::GatherInput(char* to) const {
  if (call_.pieces.empty()) {
    // A scatter's other ranks may pass no input: what they send only gives the ring room.
    if (call_.input == nullptr) {
      std::memset(to, 0, bytes_.input);
    } else if (bytes_.input > 0) {
      std::memcpy(to, call_.input, bytes_.input);
    }
    return;
  }
  for (const TensorPiece& piece : call_.pieces) {
    if (piece.bytes > 0) std::memcpy(to, piece.data, piece.bytes);
    to += piece.bytes;
  }
}

void PendingCollective::ScatterOutput(const char* from) const {
  if (call_.pieces.empty()) {
    std::memcpy(call_.output, from, bytes_.output);
    return;
  }
  for (const TensorPiece& piece : call_.pieces) {
    if (piece.bytes > 0) std::memcpy(piece.data, from, piece.bytes);
    from += piece.bytes;
  }
}

void PendingCollective::NameRegistered(uint64_t id, uint64_t offset) {
  v1::RegisteredTensor* registered = request_.mutable_registered();
  registered->set_buffer_id(id);
  registered->set_offset(offset);
  registered->set_size_bytes(bytes_.buffer());
}

void PendingCollective::UseRegistered(uint64_t id, uint64_t offset) {
  NameRegistered(id, offset);
  registered_ = true;
  if (TraitsOf(call_.spec.kind).gathers && call_.input != call_.output && bytes_.input > 0) {
    // The input may be the rank's own slot of the output (NCCL's in-place all-gather).
    std::memmove(call_.output, call_.input, bytes_.input);
    wrote_registered_ = true;
  }
}

void PendingCollective::UseStaging(std::shared_ptr<RegisteredMemory> buffer,
                                   std::shared_ptr<StagingBuffers> staging) {
  FillStaged(static_cast<char*>(buffer->data()));
  NameRegistered(buffer->id(), 0);
  staged_ = std::move(buffer);
  staging_ = std::move(staging);
}

void PendingCollective::UseStagingArriving(std::shared_ptr<RegisteredMemory> buffer,
                                           std::shared_ptr<StagingBuffers> staging) {
  const ArrivalLayout layout = ClientArrivalLayout(bytes_.input);
  ArrivalMarker(static_cast<std::byte*>(buffer->data()) + layout.marks_offset, layout.blocks())
      .Reset();
  NameRegistered(buffer->id(), 0);
  v1::InputArrivalMarks* marks = request_.mutable_registered()->mutable_arrival();
  marks->set_block_bytes(layout.block_bytes);
  marks->set_marks_offset(layout.marks_offset);
  arrival_ = layout;
  staged_ = std::move(buffer);
  staging_ = std::move(staging);
  absl::MutexLock lock(&mu_);
  copying_in_ = true;
}

void PendingCollective::CopyInArriving(int rank, int world_size) {
  const ArrivalLayout& layout = *arrival_;
  auto* to = static_cast<std::byte*>(staged_->data());
  const auto* from = static_cast<const std::byte*>(call_.input);
  ArrivalMarker marker(to + layout.marks_offset, layout.blocks());
  std::vector<bool> copied(layout.blocks(), false);
  auto copy_block = [&](uint64_t block) {
    if (copied[block]) return true;
    {
      absl::MutexLock lock(&mu_);
      if (finish_later_.has_value()) return false;  // over already: no one reads the rest
    }
    const uint64_t begin = block * layout.block_bytes;
    std::memcpy(to + begin, from + begin, std::min(layout.block_bytes, bytes_.input - begin));
    marker.Mark(block);
    copied[block] = true;
    return true;
  };
  const size_t esize = DTypeSize(call_.spec.dtype);
  bool going = true;
  if (rank >= 0 && rank < world_size) {
    for (const ElementRange& chunk : AllReduceInputOrder(rank, world_size, call_.spec.count)) {
      if (chunk.count == 0) continue;
      const uint64_t last = (chunk.end() * esize - 1) / layout.block_bytes;
      for (uint64_t b = chunk.offset * esize / layout.block_bytes; going && b <= last; ++b) {
        going = copy_block(b);
      }
    }
  }
  for (uint64_t b = 0; going && b < layout.blocks(); ++b) going = copy_block(b);
  std::optional<FinishLater> finish;
  {
    absl::MutexLock lock(&mu_);
    copying_in_ = false;
    finish = std::exchange(finish_later_, std::nullopt);
  }
  if (finish.has_value()) FinishNow(std::move(finish->rpc_status), finish->worker_done);
}

void PendingCollective::UseArenaSlice(StagingArena::Slice slice) {
  FillStaged(reinterpret_cast<char*>(slice.data()));
  NameRegistered(slice.buffer_id(), slice.offset());
  slice_.emplace(std::move(slice));
}

void PendingCollective::Finish(absl::Status rpc_status, bool worker_done) {
  {
    absl::MutexLock lock(&mu_);
    if (copying_in_) {
      finish_later_ = FinishLater{std::move(rpc_status), worker_done};
      return;
    }
  }
  FinishNow(std::move(rpc_status), worker_done);
}

void PendingCollective::FinishNow(absl::Status rpc_status, bool worker_done) {
  const bool answered = rpc_status.ok();
  absl::Status status = answered ? CopyResultOut() : std::move(rpc_status);
  if (answered && !status.ok() && registered_) {
    // The worker ran it in the caller's buffer: whatever it left there is not the input.
    status.SetPayload(kRegisteredBufferPayloadUrl, absl::Cord(kRegisteredBufferUnspecified));
  }
  if (region_.has_value()) {
    if (worker_done) {
      pool_->Release(*std::move(region_));
    } else {
      pool_->Discard(*std::move(region_));
    }
    region_.reset();
  }
  if (staged_ != nullptr) {
    if (worker_done) {
      staging_->Release(std::move(staged_));
    } else {
      staging_->Retire(std::move(staged_));
    }
  }
  if (slice_.has_value()) {
    if (!worker_done) slice_->Retire();
    slice_.reset();
  }
  // The completed RPC needs neither copy of the tensor any more.
  request_.clear_data();
  response_.clear_inline_data();
  Complete(std::move(status));
}

const void* PendingCollective::ResultInSharedMemory() const {
  if (region_.has_value()) return region_->data();
  if (staged_ != nullptr) return staged_->data();
  if (slice_.has_value()) return slice_->data();
  return nullptr;
}

absl::Status PendingCollective::CopyResultOut() {
  if (call_.spec.kind == CollectiveKind::kGather) {
    // Only the rank the worker ran as the root has a result: all of the output (none
    // elsewhere, nor for an empty gather).
    if (response_.result_bytes() == 0) return absl::OkStatus();
    if (response_.result_bytes() != bytes_.output || call_.output == nullptr) {
      return absl::InternalError(absl::StrCat(
          DescribeCall(call_), ": the worker returned a gather's result of ",
          response_.result_bytes(), " bytes for an output of ", bytes_.output,
          call_.output == nullptr ? " left out" : "", "; the output was left ",
          registered_ ? "as the worker left it" : "untouched",
          " (did the ring change size? It had ", bytes_.output / std::max<size_t>(bytes_.input, 1),
          " ranks when the call began)"));
    }
  }
  if (bytes_.side_by_side && response_.result_bytes() != bytes_.output) {
    return absl::InternalError(absl::StrCat(
        DescribeCall(call_), ": the worker returned an uneven all-to-all's result of ",
        response_.result_bytes(), " bytes for an output of ", bytes_.output,
        "; the output was left ", registered_ ? "as the worker left it" : "untouched",
        " (is the worker of another ringsync version?)"));
  }
  if (TraitsOf(call_.spec.kind).scatters && response_.result_bytes() != bytes_.output) {
    // The block's size follows the ring's, which may have changed since the call began.
    return absl::InternalError(absl::StrCat(
        DescribeCall(call_), ": the worker's block of the result holds ",
        response_.result_bytes(), " bytes, the output ", bytes_.output, "; the output was left ",
        registered_ ? "as the worker left it" : "untouched", " (did the ring change size? It had ",
        call_.spec.count / std::max<size_t>(call_.output_count, 1), " ranks when the call began)"));
  }
  if (registered_) return MoveRegisteredBlock();  // the worker wrote the result in place
  const void* result = ResultInSharedMemory();
  if (result != nullptr) {
    // A reduce-scatter's or a scatter's result is the block of the rank the worker ran it as.
    if (absl::Status placed = CheckResultOffset(); !placed.ok()) return placed;
    result = static_cast<const char*>(result) + response_.result_offset();
  } else {
    if (response_.inline_data().size() != bytes_.output) {
      // An AllGather result scales with the ring, which may have changed size since the
      // call started; anything else means the two sides disagree about the contract.
      const std::string why =
          call_.spec.kind == CollectiveKind::kAllGather
              ? absl::StrCat("did the ring change size? It had ",
                             call_.output_count / std::max<size_t>(call_.spec.count, 1),
                             " ranks when the call began")
              : "is the worker of another ringsync version?";
      return absl::InternalError(absl::StrCat(DescribeCall(call_), ": the worker returned ",
                                              response_.inline_data().size(),
                                              " bytes of result, expected ", bytes_.output,
                                              "; the buffer was left untouched (", why, ")"));
    }
    result = response_.inline_data().data();
  }
  if (bytes_.output > 0) ScatterOutput(static_cast<const char*>(result));
  return absl::OkStatus();
}

absl::Status PendingCollective::MoveRegisteredBlock() {
  if (!TraitsOf(call_.spec.kind).scatters) return absl::OkStatus();
  // A reduce-scatter or scatter in place: the block of the rank the worker ran it as,
  // which is the output unless the ring re-formed since the call began.
  if (absl::Status placed = CheckResultOffset(); !placed.ok()) return placed;
  const char* block = static_cast<const char*>(call_.input) + response_.result_offset();
  if (block != call_.output) std::memmove(call_.output, block, bytes_.output);
  return absl::OkStatus();
}

absl::Status PendingCollective::CheckResultOffset() const {
  const uint64_t offset = response_.result_offset();
  if (offset <= bytes_.buffer() && bytes_.buffer() - offset >= bytes_.output) {
    return absl::OkStatus();
  }
  return absl::InternalError(absl::StrCat(
      DescribeCall(call_), ": the worker placed the result at byte ", offset, " of a ",
      bytes_.buffer(), "-byte buffer, past its end; the buffer was left ",
      registered_ ? "as the worker left it" : "untouched",
      " (is the worker of another ringsync version?)"));
}

void PendingCollective::Complete(absl::Status status) {
  {
    absl::MutexLock lock(&mu_);
    status_ = status;
    done_ = true;
  }
  if (on_complete_) on_complete_(status);
}

void PendingCollective::SetHooks(std::function<void(const absl::Status&)> on_complete,
                                 std::function<void()> on_wait) {
  on_complete_ = std::move(on_complete);
  on_wait_ = std::move(on_wait);
}

void PendingCollective::Resolve(absl::Status status) { Complete(std::move(status)); }

bool PendingCollective::Ready() const {
  {
    absl::MutexLock lock(&mu_);
    if (done_ || !on_wait_) return done_;
  }
  on_wait_();
  absl::MutexLock lock(&mu_);
  return done_;
}

absl::Status PendingCollective::Wait() {
  if (on_wait_) Ready();  // runs the hook when not complete
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(&done_));
  return status_;
}

absl::Status PendingCollective::Wait(absl::Duration timeout) {
  if (on_wait_) Ready();  // runs the hook when not complete
  absl::MutexLock lock(&mu_);
  if (!AwaitWithLimit(mu_, absl::Condition(&done_), WaitLimit{SteadyDeadline(timeout)}, "").ok()) {
    return absl::DeadlineExceededError(absl::StrCat(
        DescribeCall(call_), " is still in flight after ", absl::FormatDuration(timeout),
        "; it continues: call Wait() again before touching its buffer"));
  }
  return status_;
}

size_t PendingCollective::answer_data_bytes() const {
  return registered_ || ResultInSharedMemory() != nullptr ? 0 : bytes_.output;
}

}  // namespace ringsync::internal
