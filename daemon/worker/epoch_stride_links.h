// EpochStrideLinks: one generation's StrideLinks (core/link/stride_links.h) — the
// epoch's ring link as stride 1, and stride links connected through the LinkFactory on
// first use, kept until the epoch ends (they are fenced by its generation like the ring
// link: the registry's inbox of each accepts only the rank the view puts there).
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "core/link/stride_links.h"
#include "daemon/worker/ring_epoch.h"

namespace ringsync {

class EpochStrideLinks final : public StrideLinks {
 public:
  // REQUIRES: `epoch.link` is connected; `epoch`, `factory` and `connected_total` outlive
  // this. `connected_total` counts every stride link connected, and
  // `epoch.stride_links_open` those open now (metrics).
  EpochStrideLinks(RingEpoch& epoch, LinkFactory& factory, std::atomic<uint64_t>& connected_total)
      : epoch_(epoch), factory_(factory), connected_total_(connected_total) {}

  absl::StatusOr<Link*> Stride(int stride, const WaitLimit& limit) override;
  std::vector<Link*> Connected() override;

 private:
  RingEpoch& epoch_;
  LinkFactory& factory_;
  std::atomic<uint64_t>& connected_total_;
  std::map<int, std::unique_ptr<Link>> strides_;  // by stride, 2 and up
};

}  // namespace ringsync
