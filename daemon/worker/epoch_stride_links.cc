#include "daemon/worker/epoch_stride_links.h"

#include "absl/strings/str_cat.h"

namespace ringsync {

absl::StatusOr<Link*> EpochStrideLinks::Stride(int stride, const WaitLimit& limit) {
  if (stride == 1) return epoch_.link.get();
  if (auto it = strides_.find(stride); it != strides_.end()) return it->second.get();
  absl::StatusOr<std::unique_ptr<Link>> link = factory_.ConnectStride(epoch_, stride, limit);
  if (!link.ok()) return link.status();
  Link* connected = link->get();
  strides_.emplace(stride, *std::move(link));
  epoch_.stride_links_open.store(static_cast<int>(strides_.size()));
  connected_total_.fetch_add(1);
  return connected;
}

std::vector<Link*> EpochStrideLinks::Connected() {
  std::vector<Link*> links{epoch_.link.get()};
  for (const auto& [stride, link] : strides_) links.push_back(link.get());
  return links;
}

}  // namespace ringsync
