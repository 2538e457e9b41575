#include "client/python/src/alltoall_splits.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "core/collective.h"

namespace py = pybind11;

namespace ringsync::python {
namespace {

uint64_t Sum(const std::vector<uint64_t>& counts) {
  uint64_t sum = 0;
  for (uint64_t count : counts) sum += count;
  return sum;
}

// Rows for (or from) each rank: `splits` as given, else `rows` split evenly.
std::vector<uint64_t> RowsOf(py::handle splits, py::ssize_t rows, int world_size,
                             absl::string_view what, absl::string_view name) {
  const std::string call = absl::StrCat("alltoall '", name, "'");
  std::vector<uint64_t> out;
  if (splits.is_none()) {
    if (rows % world_size != 0) {
      throw py::value_error(absl::StrCat(call, ": the ", what, " has ", rows,
                                         " rows, not an equal share for each of ", world_size,
                                         " ranks; pass ", what, "_splits"));
    }
    out.assign(static_cast<size_t>(world_size), static_cast<uint64_t>(rows / world_size));
    return out;
  }
  if (!py::isinstance<py::sequence>(splits) || py::isinstance<py::str>(splits)) {
    throw py::type_error(absl::StrCat(call, ": ", what, "_splits must be a sequence of ints"));
  }
  const py::sequence sequence = py::reinterpret_borrow<py::sequence>(splits);
  if (sequence.size() != static_cast<size_t>(world_size)) {
    throw py::value_error(absl::StrCat(call, ": ", what, "_splits lists ", sequence.size(),
                                       " sizes; this ring has ", world_size, " ranks"));
  }
  for (py::handle item : sequence) {
    if (!py::isinstance<py::int_>(item) || item.cast<py::int_>() < py::int_(0) ||
        item.cast<py::int_>() > py::int_(kMaxCollectiveElements)) {
      throw py::value_error(absl::StrCat(call, ": ", what, "_splits must be ints from 0 to "
                                         "2^40, one per rank"));
    }
    out.push_back(item.cast<uint64_t>());
  }
  return out;
}

}  // namespace

AllToAllSplits SplitsOf(const TensorArg& input, const TensorArg* out, py::handle input_splits,
                        py::handle output_splits, int world_size, absl::string_view name) {
  const std::string call = absl::StrCat("alltoall '", name, "'");
  if (input.shape.empty()) {
    throw py::value_error(absl::StrCat(call, ": split sizes count rows of the first dimension; "
                                             "pass a tensor of at least one"));
  }
  uint64_t row = 1;  // elements past the first dimension
  for (size_t i = 1; i < input.shape.size(); ++i) row *= static_cast<uint64_t>(input.shape[i]);
  AllToAllSplits splits;
  const std::vector<uint64_t> sent = RowsOf(input_splits, input.shape[0], world_size, "input", name);
  if (Sum(sent) != static_cast<uint64_t>(input.shape[0])) {
    throw py::value_error(absl::StrCat(call, ": input_splits add up to ", Sum(sent),
                                       " rows; the input has ", input.shape[0]));
  }
  if (output_splits.is_none() && out == nullptr) {
    throw py::value_error(absl::StrCat(call, ": with input_splits, pass output_splits (or an "
                                             "out= to split evenly)"));
  }
  if (out != nullptr && out->shape.empty()) {
    throw py::value_error(absl::StrCat(call, ": out must have a first dimension to split"));
  }
  const std::vector<uint64_t> received =
      RowsOf(output_splits, out != nullptr ? out->shape[0] : 0, world_size, "output", name);
  for (uint64_t rows : sent) splits.send_counts.push_back(rows * row);
  for (uint64_t rows : received) splits.receive_counts.push_back(rows * row);
  splits.output_rows = static_cast<py::ssize_t>(Sum(received));
  return splits;
}

}  // namespace ringsync::python
