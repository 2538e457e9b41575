// Test helper: a rank's stride links with the link of one stride replaced by a FaultyLink
// over it (core/link/faulty_link.h), for the stride algorithms' failure specifications.
#pragma once

#include <vector>

#include "absl/status/statusor.h"
#include "core/link/faulty_link.h"
#include "core/link/stride_links.h"

namespace ringsync::testing {

class LinksWithFault final : public StrideLinks {
 public:
  // REQUIRES: all three outlive this; `replaced` is one of `inner`'s links.
  LinksWithFault(StrideLinks& inner, Link& replaced, FaultyLink& faulty)
      : inner_(inner), replaced_(replaced), faulty_(faulty) {}

  absl::StatusOr<Link*> Stride(int stride, const WaitLimit& limit) override {
    absl::StatusOr<Link*> link = inner_.Stride(stride, limit);
    if (link.ok() && *link == &replaced_) return &faulty_;
    return link;
  }
  std::vector<Link*> Connected() override {
    std::vector<Link*> links = inner_.Connected();
    for (Link*& link : links) {
      if (link == &replaced_) link = &faulty_;
    }
    return links;
  }

 private:
  StrideLinks& inner_;
  Link& replaced_;
  FaultyLink& faulty_;
};

}  // namespace ringsync::testing
