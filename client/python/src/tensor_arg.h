// TensorArg: the memory of a numpy array or a CPU torch tensor, as the SDK's raw-pointer
// calls take it (data, count, dtype), after every check that would otherwise surface as
// a wrong answer or a crash. Nothing is copied: the SDK reads and writes `data` directly.
//
// Accepted: numpy.ndarray and torch.Tensor, C-contiguous, on the CPU, of a dtype the
// daemon reduces (float32, float64, float16, bfloat16 (torch only), int32, int64, int8,
// uint8); writable when the collective writes into it. Anything else raises TypeError
// (not an array, or a dtype ringsync has not got) or ValueError (a layout, device or
// autograd state the caller can fix), each saying what to do.
//
// Thread-safety: call with the GIL held; the result's `data` stays valid while `owner`
// (a reference to the array) is alive.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "pybind11/pybind11.h"
#include "ringsync/dtype.h"

namespace ringsync::python {

struct TensorArg {
  pybind11::object owner;  // the array itself: keeps `data` alive
  void* data = nullptr;
  size_t count = 0;
  DType dtype = DType::kFloat32;
  std::vector<pybind11::ssize_t> shape;
  bool is_torch = false;
};

enum class Access { kRead, kReadWrite };

// `call` names the method in error messages ("allreduce_").
TensorArg ToTensorArg(pybind11::handle object, absl::string_view call, Access access);

// A new, uninitialized array of the same kind (numpy or torch) and dtype as `like`, whose
// first dimension is `factor` times like's (a 0-d `like` gives shape (factor,)): the
// output of an all-gather.
TensorArg NewGatherOutput(const TensorArg& like, int factor);

// A new, uninitialized array of the same kind and dtype as `like`, whose first dimension
// is like's divided by `divisor`, rounded down (a 0-d `like` gives shape (0,)): the
// output of a reduce-scatter or a scatter (`call`). The SDK refuses a `like` that does
// not divide, telling every rank, so a bad call fails everywhere instead of leaving the
// others waiting.
TensorArg NewScatterOutput(const TensorArg& like, int divisor, absl::string_view call);

// A new, uninitialized array of the same kind and dtype as `like`, with `rows` as its
// first dimension and like's others: the output of an uneven all-to-all (`call`).
// REQUIRES: like has a first dimension.
TensorArg NewRowsLike(const TensorArg& like, pybind11::ssize_t rows, absl::string_view call);

}  // namespace ringsync::python
