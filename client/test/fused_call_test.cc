#include "client/src/fused_call.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringsync::internal {
namespace {

using ::testing::HasSubstr;
using ::testing::MatchesRegex;

TEST(FusedCall, PacksTheTensorsInOrderAndNamesTheCollectiveAfterThem) {
  std::vector<float> w(6), b(2), empty;
  std::vector<GroupTensor> tensors = {GroupTensor::Of("fc1.weight", absl::MakeSpan(w)),
                                      GroupTensor::Of("fc1.empty", absl::MakeSpan(empty)),
                                      GroupTensor::Of("fc1.bias", absl::MakeSpan(b))};
  absl::StatusOr<CollectiveCall> call =
      MakeFusedCall(tensors, ReduceOp::kAvg, {.post_scale = 0.5});
  ASSERT_TRUE(call.ok()) << call.status();
  EXPECT_EQ(call->spec.count, 8u);
  EXPECT_EQ(call->output_count, 8u);
  EXPECT_EQ(call->spec.op, ReduceOp::kAvg);
  EXPECT_EQ(call->spec.post_scale, 0.5);
  EXPECT_EQ(call->spec.members,
            (std::vector<FusedMember>{{"fc1.weight", 6}, {"fc1.empty", 0}, {"fc1.bias", 2}}));
  ASSERT_EQ(call->pieces.size(), 3u);
  EXPECT_EQ(call->pieces[0].data, w.data());
  EXPECT_EQ(call->pieces[2].bytes, 8u);
  EXPECT_THAT(call->spec.name,
              MatchesRegex("fused 3 tensors 'fc1.weight'..'fc1.bias' #[0-9a-f]{16}"));
  EXPECT_TRUE(ValidateCall(*call, 0).ok());
}

TEST(FusedCall, TheDigestCoversEveryNameAndCount) {
  const uint64_t base = MembersDigest({{"a", 12}, {"b", 1}});
  EXPECT_EQ(MembersDigest({{"a", 12}, {"b", 1}}), base);
  EXPECT_NE(MembersDigest({{"a1", 2}, {"b", 1}}), base);
  EXPECT_NE(MembersDigest({{"a", 12}, {"b", 2}}), base);
  EXPECT_NE(MembersDigest({{"b", 1}, {"a", 12}}), base);
}

TEST(FusedCall, ABadTensorIsNamed) {
  std::vector<float> f(2);
  std::vector<double> d(2);
  EXPECT_THAT(std::string(MakeFusedCall({}, ReduceOp::kSum, {}).status().message()),
              HasSubstr("no tensors"));
  std::vector<GroupTensor> tensors = {GroupTensor::Of("a", absl::MakeSpan(f)),
                                      GroupTensor::Of("b", absl::MakeSpan(d))};
  EXPECT_THAT(std::string(MakeFusedCall(tensors, ReduceOp::kSum, {}).status().message()),
              HasSubstr("tensor #1 'b' is float64 where tensor #0 is float32"));
  tensors[1] = GroupTensor{"", f.data(), 2, DType::kFloat32};
  EXPECT_THAT(std::string(MakeFusedCall(tensors, ReduceOp::kSum, {}).status().message()),
              HasSubstr("tensor #1 '' has no name"));
  tensors[1] = GroupTensor{"c", nullptr, 2, DType::kFloat32};
  EXPECT_THAT(std::string(MakeFusedCall(tensors, ReduceOp::kSum, {}).status().message()),
              HasSubstr("tensor #1 'c' is null"));
}

}  // namespace
}  // namespace ringsync::internal
