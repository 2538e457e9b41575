#include "core/reduce/reducer_factory.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/strip.h"
#include "absl/strings/str_cat.h"
#include "core/reduce/cpu_reducer.h"
#if RINGSYNC_HAVE_CUDA
#include "core/reduce/cuda/cuda_reducer.h"
#endif

namespace ringsync {
namespace {

constexpr absl::string_view kUseCpuHint = "; use --reduce_device=cpu or auto";

struct DeviceSpec {
  enum class Kind { kAuto, kCpu, kCuda };
  Kind kind = Kind::kAuto;
  int index = 0;  // CUDA device, for kCuda
};

absl::StatusOr<DeviceSpec> ParseDevice(absl::string_view device) {
  const std::string lower = absl::AsciiStrToLower(device);
  if (lower == "auto") return DeviceSpec{DeviceSpec::Kind::kAuto};
  if (lower == "cpu") return DeviceSpec{DeviceSpec::Kind::kCpu};
  if (lower == "cuda") return DeviceSpec{DeviceSpec::Kind::kCuda, 0};
  absl::string_view number = lower;
  // SimpleAtoi alone would accept "+1", " 1" and "-1"; a device number is digits only.
  if (absl::ConsumePrefix(&number, "cuda:") && !number.empty() && number.size() <= 6 &&
      std::all_of(number.begin(), number.end(), absl::ascii_isdigit)) {
    int index = 0;
    if (absl::SimpleAtoi(number, &index)) return DeviceSpec{DeviceSpec::Kind::kCuda, index};
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown reduce device '", device, "'; expected auto, cpu, cuda or cuda:N (N = 0, 1, ...)"));
}

absl::StatusOr<std::unique_ptr<Reducer>> MakeCuda(int index) {
#if RINGSYNC_HAVE_CUDA
  absl::StatusOr<std::unique_ptr<CudaReducer>> reducer = MakeCudaReducer(index);
  if (!reducer.ok()) {
    return absl::Status(reducer.status().code(),
                        absl::StrCat(reducer.status().message(), kUseCpuHint));
  }
  return std::unique_ptr<Reducer>(*std::move(reducer));
#else
  return absl::FailedPreconditionError(absl::StrCat(
      "cuda:", index,
      " requested but this ringsync binary was built without CUDA (no nvcc at configure "
      "time; rebuild with the CUDA toolkit installed)",
      kUseCpuHint));
#endif
}

// auto never fails for lack of a GPU: every CUDA problem becomes the reason for the CPU.
ReducerChoice ChooseAuto() {
#if RINGSYNC_HAVE_CUDA
  const absl::StatusOr<int> count = CudaDeviceCount();
  if (!count.ok()) {
    return {std::make_unique<CpuReducer>(),
            absl::StrCat("auto: no usable CUDA device (", count.status().message(), "); using cpu")};
  }
  if (*count == 0) {
    return {std::make_unique<CpuReducer>(),
            "auto: cudaGetDeviceCount found no CUDA device; using cpu"};
  }
  absl::StatusOr<std::unique_ptr<CudaReducer>> cuda = MakeCudaReducer(0);
  if (!cuda.ok()) {
    return {std::make_unique<CpuReducer>(),
            absl::StrCat("auto: ", cuda.status().message(), "; using cpu")};
  }
  return {*std::move(cuda), absl::StrCat("auto: ", *count, " CUDA device(s) found; using cuda:0")};
#else
  return {std::make_unique<CpuReducer>(), "auto: this binary was built without CUDA; using cpu"};
#endif
}

}  // namespace

bool BuiltWithCuda() {
#if RINGSYNC_HAVE_CUDA
  return true;
#else
  return false;
#endif
}

absl::StatusOr<ReducerChoice> ChooseReducer(absl::string_view device) {
  absl::StatusOr<DeviceSpec> spec = ParseDevice(device);
  if (!spec.ok()) return spec.status();
  switch (spec->kind) {
    case DeviceSpec::Kind::kAuto:
      return ChooseAuto();
    case DeviceSpec::Kind::kCpu:
      return ReducerChoice{std::make_unique<CpuReducer>(), "cpu requested"};
    case DeviceSpec::Kind::kCuda: {
      absl::StatusOr<std::unique_ptr<Reducer>> reducer = MakeCuda(spec->index);
      if (!reducer.ok()) return reducer.status();
      return ReducerChoice{*std::move(reducer), absl::StrCat("cuda:", spec->index, " requested")};
    }
  }
  return absl::InternalError("unreachable device kind");
}

absl::StatusOr<std::unique_ptr<Reducer>> MakeReducer(absl::string_view device) {
  absl::StatusOr<ReducerChoice> choice = ChooseReducer(device);
  if (!choice.ok()) return choice.status();
  return std::move(choice->reducer);
}

std::vector<std::unique_ptr<Reducer>> AvailableReducers() {
  std::vector<std::unique_ptr<Reducer>> reducers;
  reducers.push_back(std::make_unique<CpuReducer>());
#if RINGSYNC_HAVE_CUDA
  const absl::StatusOr<int> count = CudaDeviceCount();
  for (int device = 0; count.ok() && device < *count; ++device) {
    // A device this build cannot use (too old, busy) is skipped, as auto would.
    if (absl::StatusOr<std::unique_ptr<CudaReducer>> cuda = MakeCudaReducer(device); cuda.ok()) {
      reducers.push_back(*std::move(cuda));
    }
  }
#endif
  return reducers;
}

}  // namespace ringsync
