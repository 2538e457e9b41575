#include "ringsync/elastic_state.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "core/sync/steady_deadline.h"
#include "ringsync/outcome.h"

namespace ringsync {
namespace {

// The committed step a rank without a commit reports: below every real step.
constexpr int64_t kNoCommit = -1;
constexpr absl::Duration kMaxBackoff = absl::Seconds(1);

// A failure after which Sync starts again on the ring as it is then: the membership
// changed, the outcome is in doubt, or the ring is re-forming (not formed, a view moved on).
bool RingMoved(const absl::Status& status) {
  return IsMembershipChanged(status) || IsInDoubt(status) || absl::IsUnavailable(status) ||
         absl::IsAborted(status);
}

}  // namespace

ElasticState::ElasticState(Client& client, ElasticOptions options)
    : client_(client), options_(options) {}

void ElasticState::Register(absl::string_view name, void* data, size_t count, DType dtype) {
  buffers_.push_back(Buffer{std::string(name), data, count, dtype, count * DTypeSize(dtype), {}});
}

void ElasticState::Commit() {
  for (Buffer& b : buffers_) {
    b.committed.resize(b.bytes);
    if (b.bytes > 0) std::memcpy(b.committed.data(), b.data, b.bytes);
  }
  committed_step_ = step_;
}

void ElasticState::Restore() {
  if (!committed_step_.has_value()) return;
  for (Buffer& b : buffers_) {
    if (b.bytes > 0) std::memcpy(b.data, b.committed.data(), b.bytes);
  }
  step_ = *committed_step_;
}

absl::Status ElasticState::Sync() {
  const SteadyDeadline give_up(options_.sync_timeout);
  absl::Duration backoff = options_.retry_backoff;
  for (int attempt = 1;; ++attempt) {
    absl::Status status = client_.AwaitRing(give_up.Left());
    if (status.ok()) status = SyncOnce();
    if (status.ok()) return status;
    Restore();  // a broadcast that completed before the failure is undone
    if (!RingMoved(status) && !absl::IsDeadlineExceeded(status)) return status;
    if (give_up.Left() <= backoff) {
      return absl::Status(status.code(),
                          absl::StrCat("ElasticState::Sync gave up after ", attempt,
                                       " attempts within ",
                                       absl::FormatDuration(options_.sync_timeout),
                                       " (ElasticOptions::sync_timeout): ", status.message()));
    }
    ++sync_restarts_;
    absl::SleepFor(backoff);
    backoff = std::min(backoff * 2, kMaxBackoff);
  }
}

absl::Status ElasticState::SyncOnce() {
  CollectiveOptions options;
  options.timeout = options_.collective_timeout;
  AllReduceOptions reduce_options;
  reduce_options.timeout = options_.collective_timeout;

  const int64_t mine = committed_step_.has_value() ? static_cast<int64_t>(*committed_step_)
                                                   : kNoCommit;
  int64_t newest = mine;
  if (absl::Status s = client_.AllReduce("ringsync.elastic/step", absl::MakeSpan(&newest, 1),
                                         ReduceOp::kMax, reduce_options);
      !s.ok()) {
    return s;
  }
  // The lowest rank holding the newest commit is the source: every rank computes the same.
  int64_t source = mine == newest ? client_.rank() : std::numeric_limits<int64_t>::max();
  if (absl::Status s = client_.AllReduce("ringsync.elastic/source", absl::MakeSpan(&source, 1),
                                         ReduceOp::kMin, reduce_options);
      !s.ok()) {
    return s;
  }
  if (source == client_.rank()) Restore();  // the source sends its commit, not work since
  for (Buffer& b : buffers_) {
    if (absl::Status s = client_.Broadcast(absl::StrCat("ringsync.elastic/", b.name), b.data,
                                           b.count, b.dtype, static_cast<int>(source), options);
        !s.ok()) {
      return s;
    }
  }
  step_ = newest == kNoCommit ? step_ : static_cast<uint64_t>(newest);
  if (newest == kNoCommit) {
    // Nobody had committed: rank 0's step goes with its buffers.
    int64_t step = static_cast<int64_t>(step_);
    if (absl::Status s = client_.Broadcast("ringsync.elastic/initial_step",
                                           absl::MakeSpan(&step, 1), static_cast<int>(source),
                                           options);
        !s.ok()) {
      return s;
    }
    step_ = static_cast<uint64_t>(step);
  }
  Commit();
  return absl::OkStatus();
}

}  // namespace ringsync
