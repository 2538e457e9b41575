#include "client/src/fusion_queue.h"

#include <utility>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "client/src/fused_call.h"
#include "core/collective.h"
#include "core/sync/monotonic_clock.h"

namespace ringsync::internal {
namespace {

// Same dtype, op, scales and timeout: one fused all-reduce can carry both.
bool Compatible(const CollectiveCall& a, const CollectiveCall& b) {
  return a.spec.dtype == b.spec.dtype && a.spec.op == b.spec.op &&
         a.spec.pre_scale == b.spec.pre_scale && a.spec.post_scale == b.spec.post_scale &&
         a.timeout == b.timeout;
}

// A plain all-reduce that would go through on its own (ValidateCall) can join a batch.
bool Fusible(const CollectiveCall& call) {
  return call.spec.kind == CollectiveKind::kAllReduce && call.pieces.empty() &&
         call.spec.members.empty() && call.refusal.ok() && ValidateCall(call, 0).ok();
}

// The batch's failure, as the caller of tensor #i of n hears it (outcome mark kept).
absl::Status ForTensor(const absl::Status& failure, const CollectiveCall& call, size_t i, size_t n) {
  absl::Status status(failure.code(), absl::StrCat("tensor ", QuotedName(call.spec), " (#", i, " of ",
                                                   n, " fused into one all-reduce): ",
                                                   failure.message()));
  failure.ForEachPayload([&status](absl::string_view url, const absl::Cord& payload) {
    status.SetPayload(url, payload);
  });
  return status;
}

}  // namespace

FusionQueue::FusionQueue(const FusionOptions& options, Starter start)
    : options_(options), start_(std::move(start)) {
  timer_ = std::thread(&FusionQueue::RunTimer, this);
}

FusionQueue::~FusionQueue() { Close(); }

CollectiveHandle FusionQueue::Submit(CollectiveCall call) {
  Entry entry;
  entry.fusible = Fusible(call);
  if (entry.fusible) entry.bytes = call.spec.count * DTypeSize(call.spec.dtype);
  // A tensor as large as a batch goes alone, as the plain all-reduce it is.
  if (entry.bytes >= options_.threshold_bytes) entry.fusible = false;
  entry.queued_at = MonotonicNow();
  entry.state = std::make_shared<PendingCollective>(call, CallBytes{});
  entry.state->SetHooks(nullptr, [this] { OnWait(); });
  entry.call = std::move(call);
  CollectiveHandle handle = PendingCollective::MakeHandle(entry.state);

  absl::MutexLock lock(&mu_);
  if (closing_) {
    entry.state->Resolve(absl::CancelledError(
        absl::StrCat(DescribeCall(entry.call), ": its Client is being destroyed")));
    return handle;
  }
  if (!entry.fusible) {
    Cut();
  } else if (run_entries_ > 0 && (!Compatible(run_head_, entry.call) ||
                                  run_bytes_ + entry.bytes > options_.threshold_bytes)) {
    Cut();
  }
  if (run_entries_ == 0) run_head_ = entry.call;
  entry.run = run_;
  ++run_entries_;
  run_bytes_ += entry.bytes;
  if (!entry.fusible) Cut();  // it goes alone
  queue_.push_back(std::move(entry));
  changed_ = true;
  Pump(/*speculative=*/false);
  return handle;
}

void FusionQueue::Close() {
  {
    absl::MutexLock lock(&mu_);
    closing_ = true;
    changed_ = true;
    for (Entry& entry : queue_) {
      entry.state->Resolve(absl::CancelledError(absl::StrCat(
          DescribeCall(entry.call),
          ": cancelled because its Client was destroyed before its fused batch was sent; the "
          "buffer was left untouched")));
    }
    queue_.clear();
  }
  if (timer_.joinable()) timer_.join();
}

void FusionQueue::Cut() {
  if (run_entries_ == 0) return;
  ++run_;
  run_entries_ = 0;
  run_bytes_ = 0;
}

size_t FusionQueue::ReadyBatch(bool speculative) const {
  if (queue_.empty()) return 0;
  const Entry& head = queue_.front();
  if (!head.fusible) return 1;
  size_t n = 0;
  bool retried = false;
  while (n < queue_.size() && queue_[n].run == head.run) retried |= queue_[n++].retried;
  if (head.run < run_) return n;  // the program ended this run
  return speculative && !retried ? n : 0;
}

void FusionQueue::Pump(bool speculative) {
  if (in_flight_ || closing_) return;
  const size_t n = ReadyBatch(speculative);
  if (n == 0) return;
  auto batch = std::make_shared<Batch>(std::make_move_iterator(queue_.begin()),
                                       std::make_move_iterator(queue_.begin() + n));
  queue_.erase(queue_.begin(), queue_.begin() + n);
  const bool fused = batch->front().fusible;
  CollectiveCall call;
  if (fused) {
    std::vector<GroupTensor> tensors;
    tensors.reserve(n);
    for (const Entry& entry : *batch) {
      tensors.push_back({entry.call.spec.name, entry.call.output, entry.call.spec.count,
                         entry.call.spec.dtype});
    }
    const CollectiveSpec& head = batch->front().call.spec;
    absl::StatusOr<CollectiveCall> fused_call = MakeFusedCall(
        tensors, head.op,
        {.pre_scale = head.pre_scale, .post_scale = head.post_scale,
         .timeout = batch->front().call.timeout});
    // Every member passed ValidateCall alone, so only their sum can be out of bounds.
    call = fused_call.ok() ? *std::move(fused_call) : batch->front().call;
    if (!fused_call.ok()) call.refusal = fused_call.status();
  } else {
    call = batch->front().call;
  }
  in_flight_ = true;
  // Unlocked: a call refused at once completes (OnBatchDone) before start_ returns.
  mu_.Unlock();
  start_(std::move(call), [this, batch, fused](const absl::Status& status) {
    OnBatchDone(*batch, fused, status);
  });
  mu_.Lock();
}

void FusionQueue::OnBatchDone(const Batch& batch, bool fused, const absl::Status& status) {
  absl::MutexLock lock(&mu_);
  in_flight_ = false;
  changed_ = true;
  bool first_try = false;
  for (const Entry& entry : batch) first_try |= !entry.retried;
  if (fused && !status.ok() && !closing_ && first_try && IsAgreementMismatch(status)) {
    // Ranks cut the queue in different places (a cycle-time batch somewhere): every rank
    // saw the mismatch, and every rank puts its batch back to send where the program
    // ends it.
    for (auto it = batch.rbegin(); it != batch.rend(); ++it) {
      queue_.push_front(*it);
      queue_.front().retried = true;
    }
  } else {
    for (size_t i = 0; i < batch.size(); ++i) {
      batch[i].state->Resolve(status.ok() || !fused
                                  ? status
                                  : ForTensor(status, batch[i].call, i, batch.size()));
    }
  }
  Pump(/*speculative=*/false);
}

void FusionQueue::OnWait() {
  absl::MutexLock lock(&mu_);
  Cut();
  changed_ = true;
  Pump(/*speculative=*/false);
}

void FusionQueue::RunTimer() {
  absl::MutexLock lock(&mu_);
  while (!closing_) {
    absl::Time due = absl::InfiniteFuture();
    if (!in_flight_ && ReadyBatch(/*speculative=*/true) > 0) {
      due = queue_.front().queued_at + options_.cycle_time;
    }
    const absl::Duration left = due - MonotonicNow();
    if (left <= absl::ZeroDuration()) {
      Pump(/*speculative=*/true);
      continue;
    }
    changed_ = false;
    // A step of the system clock may end this wait early (Abseil's timed waits run on
    // it); the loop then looks again.
    mu_.AwaitWithTimeout(absl::Condition(&changed_), left);
  }
}

}  // namespace ringsync::internal
