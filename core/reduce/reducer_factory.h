// Chooses the reducer a worker uses: `--reduce_device=auto|cpu|cuda[:N]`.
//
//   auto    - the first CUDA device when this build has CUDA and cudaGetDeviceCount
//             finds one, else the CPU. Never fails for lack of a GPU.
//   cpu     - the vectorized CPU reducer.
//   cuda    - CUDA device 0; cuda:N - device N. Fails now, with the CUDA error text,
//             when the build has no CUDA or no usable device N exists.
#pragma once

#include <memory>
#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/status/statusor.h"
#include "core/reduce/reducer.h"

namespace ringsync {

absl::StatusOr<std::unique_ptr<Reducer>> MakeReducer(absl::string_view device);

// What MakeReducer picked and why, for the worker's startup log line, e.g.
//   "auto: no usable CUDA device (cudaGetDeviceCount: no CUDA-capable device is
//    detected (cudaErrorNoDevice)); using cpu".
struct ReducerChoice {
  std::unique_ptr<Reducer> reducer;
  std::string reason;
};

// MakeReducer, plus the reason for its choice. Same errors as MakeReducer.
absl::StatusOr<ReducerChoice> ChooseReducer(absl::string_view device);

// Every reducer usable on this machine: the CPU one, plus one per CUDA device when
// the build has CUDA. Conformance tests run their cases against each.
std::vector<std::unique_ptr<Reducer>> AvailableReducers();

// True when this binary was built with the CUDA reducer.
bool BuiltWithCuda();

}  // namespace ringsync
