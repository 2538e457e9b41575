// GroupTensor: one tensor of a grouped all-reduce (Client::AllReduceGroup), which packs
// many tensors of one dtype into one buffer, all-reduces it as one collective and copies
// each tensor's part of the result back.
//
//   std::vector<ringsync::GroupTensor> grads = {
//       ringsync::GroupTensor::Of("fc1.weight", absl::MakeSpan(w1)),
//       ringsync::GroupTensor::Of("fc1.bias", absl::MakeSpan(b1))};
//   absl::Status s = client->AllReduceGroup(grads, ringsync::ReduceOp::kAvg);
//
// Thread-safety: a plain value; the tensor it points at belongs to the caller.
#pragma once

#include <cstddef>
#include <string>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "ringsync/types.h"

namespace ringsync {

struct GroupTensor {
  // The tensor's label (non-empty; every rank lists the same names in the same order).
  std::string name;
  // `count` elements of `dtype`; may be null when count is 0.
  void* data = nullptr;
  size_t count = 0;
  DType dtype = DType::kFloat32;

  template <Element T>
  static GroupTensor Of(absl::string_view name, absl::Span<T> tensor) {
    return GroupTensor{std::string(name), tensor.data(), tensor.size(), kDTypeOf<T>};
  }
};

}  // namespace ringsync
