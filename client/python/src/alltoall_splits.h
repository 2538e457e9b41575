// An uneven all-to-all's split sizes as Python callers give them — rows of the first
// dimension per rank, as torch's all_to_all_single takes them — turned into what the SDK
// takes: elements per rank (Client::AllToAllV).
//
// Thread-safety: call with the GIL held.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/strings/string_view.h"
#include "client/python/src/tensor_arg.h"
#include "pybind11/pybind11.h"

namespace ringsync::python {

struct AllToAllSplits {
  std::vector<uint64_t> send_counts;     // elements for each rank
  std::vector<uint64_t> receive_counts;  // elements from each rank
  pybind11::ssize_t output_rows = 0;     // the output's first dimension
};

// `input_splits` and `output_splits`: None, or a sequence of `world_size` ints >= 0, rows
// for (from) each rank. None splits its tensor's rows evenly: the input's, or `out`'s (null:
// none given) for the output, which without `out` needs output_splits. A row is the
// input's elements past its first dimension. ValueError (or TypeError for what is not a
// sequence of ints) naming the call and what to pass instead.
AllToAllSplits SplitsOf(const TensorArg& input, const TensorArg* out,
                        pybind11::handle input_splits, pybind11::handle output_splits,
                        int world_size, absl::string_view name);

}  // namespace ringsync::python
