// --reduce_device parsing and selection. Runs on any machine: expectations branch on
// whether this machine has a usable GPU (AvailableReducers() lists one per device).
#include "core/reduce/reducer_factory.h"

#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "core/sync/steady_stopwatch.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringsync {
namespace {

using ::testing::HasSubstr;

bool MachineHasUsableGpu() { return AvailableReducers().size() > 1; }

TEST(ReducerFactoryTest, CpuIsAlwaysAvailable) {
  absl::StatusOr<std::unique_ptr<Reducer>> reducer = MakeReducer("cpu");
  ASSERT_TRUE(reducer.ok()) << reducer.status();
  EXPECT_EQ((*reducer)->name(), "cpu");
  EXPECT_TRUE(MakeReducer("CPU").ok()) << "device names are case-insensitive";
}

TEST(ReducerFactoryTest, AutoPicksGpuWhenPresentElseCpu) {
  absl::StatusOr<ReducerChoice> choice = ChooseReducer("auto");
  ASSERT_TRUE(choice.ok()) << choice.status();
  ASSERT_NE(choice->reducer, nullptr);
  if (MachineHasUsableGpu()) {
    EXPECT_EQ(choice->reducer->name(), "cuda:0");
    EXPECT_THAT(choice->reason, HasSubstr("using cuda:0"));
  } else {
    EXPECT_EQ(choice->reducer->name(), "cpu");
    EXPECT_THAT(choice->reason, HasSubstr("using cpu"));
  }
  // The reason is meant for a log line: it says why, not just what.
  if (BuiltWithCuda() && !MachineHasUsableGpu()) {
    EXPECT_THAT(choice->reason, HasSubstr("cudaGetDeviceCount"));
  }
}

TEST(ReducerFactoryTest, CudaWithoutGpuFailsAtOnceAndSaysWhy) {
  if (MachineHasUsableGpu()) {
    absl::StatusOr<std::unique_ptr<Reducer>> reducer = MakeReducer("cuda");
    ASSERT_TRUE(reducer.ok()) << reducer.status();
    EXPECT_EQ((*reducer)->name(), "cuda:0");
    return;
  }
  const SteadyStopwatch start;
  absl::StatusOr<std::unique_ptr<Reducer>> reducer = MakeReducer("cuda");
  EXPECT_LT(start.Elapsed(), absl::Seconds(10)) << "must fail now, not wait for a device";
  ASSERT_FALSE(reducer.ok());
  EXPECT_EQ(reducer.status().code(), absl::StatusCode::kFailedPrecondition);
  const std::string message(reducer.status().message());
  EXPECT_THAT(message, HasSubstr("cuda:0 requested but"));
  EXPECT_THAT(message, HasSubstr("use --reduce_device=cpu or auto"));
  if (BuiltWithCuda()) {
    // CUDA's own text follows the call that failed, e.g. "cudaGetDeviceCount: CUDA
    // driver version is insufficient for CUDA runtime version (cudaErrorInsufficientDriver)".
    EXPECT_THAT(message, HasSubstr("no usable CUDA device: cudaGetDeviceCount: "));
    EXPECT_THAT(message, HasSubstr("(cudaError"));
  } else {
    EXPECT_THAT(message, HasSubstr("built without CUDA"));
  }
}

TEST(ReducerFactoryTest, CudaDeviceBeyondTheMachineFails) {
  absl::StatusOr<std::unique_ptr<Reducer>> reducer = MakeReducer("cuda:64");
  ASSERT_FALSE(reducer.ok());
  EXPECT_EQ(reducer.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(reducer.status().message(), HasSubstr("cuda:64 requested but"));
}

TEST(ReducerFactoryTest, BadSpecsAreInvalidArguments) {
  for (const char* spec : {"gpu", "", "cuda:", "cuda:x", "cuda:-1", "cuda:+1", "cuda: 1",
                           "cuda:1.5", "cuda:99999999999", "cpu:0", "cuda0", " cpu"}) {
    absl::StatusOr<std::unique_ptr<Reducer>> reducer = MakeReducer(spec);
    ASSERT_FALSE(reducer.ok()) << "'" << spec << "' was accepted";
    EXPECT_EQ(reducer.status().code(), absl::StatusCode::kInvalidArgument) << spec;
    EXPECT_THAT(reducer.status().message(), HasSubstr(absl::StrCat("'", spec, "'")));
    EXPECT_THAT(reducer.status().message(), HasSubstr("expected auto, cpu, cuda or cuda:N"));
  }
}

TEST(ReducerFactoryTest, AvailableReducersStartWithCpuThenEachGpu) {
  const std::vector<std::unique_ptr<Reducer>> reducers = AvailableReducers();
  ASSERT_FALSE(reducers.empty());
  EXPECT_EQ(reducers[0]->name(), "cpu");
  for (size_t i = 1; i < reducers.size(); ++i) {
    EXPECT_EQ(reducers[i]->name(), absl::StrCat("cuda:", i - 1));
  }
  if (!BuiltWithCuda()) {
    EXPECT_EQ(reducers.size(), 1u);
  }
}

}  // namespace
}  // namespace ringsync
