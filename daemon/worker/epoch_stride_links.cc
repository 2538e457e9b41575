#include "daemon/worker/epoch_stride_links.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "core/ring/stride_allreduce.h"
#include "daemon/logging/string_view_formatter.h"
#include "spdlog/spdlog.h"

namespace ringsync {

std::vector<int> StridesToConnectAhead(int world_size, const AlgorithmPolicy& policy) {
  const std::optional<StrideSchedule> schedule = SmallestAllReduceSchedule(world_size, policy);
  if (!schedule.has_value()) return {};
  return StridesBeyondTheRing(*schedule, world_size);
}

absl::StatusOr<Link*> EpochStrideLinks::Stride(int stride, const WaitLimit& limit) {
  if (stride == 1) return epoch_.link.get();
  {
    absl::MutexLock lock(&mu_);
    auto settled = [this, stride]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
      return !connecting_.contains(stride);
    };
    if (absl::Status s = AwaitWithLimit(mu_, absl::Condition(&settled), limit,
                                        absl::StrCat("waiting for the link of stride ", stride,
                                                     ", which is being connected"));
        !s.ok()) {
      return s;
    }
    if (auto it = strides_.find(stride); it != strides_.end()) return it->second.get();
    connecting_.insert(stride);
  }
  absl::StatusOr<std::unique_ptr<Link>> link = factory_.ConnectStride(epoch_, stride, limit);
  absl::MutexLock lock(&mu_);
  connecting_.erase(stride);
  if (!link.ok()) return link.status();
  Link* connected = link->get();
  strides_.emplace(stride, *std::move(link));
  epoch_.stride_links_open.store(static_cast<int>(strides_.size()));
  connected_total_.fetch_add(1);
  return connected;
}

std::vector<Link*> EpochStrideLinks::Connected() {
  absl::MutexLock lock(&mu_);
  std::vector<Link*> links{epoch_.link.get()};
  for (const auto& [stride, link] : strides_) links.push_back(link.get());
  return links;
}

absl::Status EpochStrideLinks::ConnectAhead(absl::Span<const int> strides, const WaitLimit& limit) {
  absl::Status first_failure;
  for (const int stride : strides) {
    if (limit.IsCancelled()) {
      return absl::CancelledError(absl::StrCat("generation ", epoch_.me.generation,
                                               " ended before its stride links were connected"));
    }
    absl::StatusOr<Link*> link = Stride(stride, limit);
    if (link.ok()) continue;
    spdlog::warn("generation {}: could not connect the link of stride {} ahead of its first "
                 "use, which tries again: {}",
                 epoch_.me.generation, stride, link.status().message());
    first_failure.Update(link.status());
  }
  return first_failure;
}

}  // namespace ringsync
