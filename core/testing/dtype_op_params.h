// Test helpers: every (dtype, reduction op) pair as the parameter of a numerics sweep.
#pragma once

#include <string>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "ringsync/dtype.h"

namespace ringsync::testing {

using DTypeAndOp = std::tuple<DType, ReduceOp>;

// Every dtype with every reduction op, for INSTANTIATE_TEST_SUITE_P of a
// TestWithParam<DTypeAndOp>.
inline auto EveryDTypeAndOp() {
  return ::testing::Combine(::testing::ValuesIn(kAllDTypes), ::testing::ValuesIn(kAllReduceOps));
}

// Names each instance after its pair, e.g. ".../float32_sum", so that a failure says which.
inline std::string DTypeAndOpName(const ::testing::TestParamInfo<DTypeAndOp>& info) {
  return absl::StrCat(DTypeName(std::get<0>(info.param)), "_",
                      ReduceOpName(std::get<1>(info.param)));
}

}  // namespace ringsync::testing
