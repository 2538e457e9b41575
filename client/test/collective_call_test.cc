#include "client/src/collective_call.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringsync::internal {
namespace {

using ::testing::HasSubstr;

std::vector<float> buffer(8, 1.0f);

CollectiveCall AllReduceCall() {
  CollectiveCall call;
  call.spec.kind = CollectiveKind::kAllReduce;
  call.spec.name = "grad/fc1";
  call.spec.dtype = DType::kFloat32;
  call.spec.count = buffer.size();
  call.spec.op = ReduceOp::kAvg;
  call.input = buffer.data();
  call.output = buffer.data();
  call.output_count = buffer.size();
  return call;
}

CollectiveCall AllGatherCall(size_t per_rank, size_t output_count) {
  CollectiveCall call = AllReduceCall();
  call.spec.kind = CollectiveKind::kAllGather;
  call.spec.count = per_rank;
  call.output_count = output_count;
  return call;
}

void ExpectInvalid(const CollectiveCall& call, const std::string& needle, int world = 4) {
  absl::StatusOr<CallBytes> bytes = ValidateCall(call, world);
  EXPECT_TRUE(absl::IsInvalidArgument(bytes.status())) << bytes.status();
  EXPECT_THAT(std::string(bytes.status().message()), HasSubstr(needle));
  EXPECT_THAT(std::string(bytes.status().message()),
              HasSubstr(call.spec.name.substr(0, kQuotedNameBytes)))
      << "name the collective";
}

TEST(CollectiveCallTest, ValidCallsReportTheirBytes) {
  absl::StatusOr<CallBytes> bytes = ValidateCall(AllReduceCall(), 4);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  EXPECT_EQ(bytes->input, 32u);
  EXPECT_EQ(bytes->output, 32u);

  bytes = ValidateCall(AllGatherCall(2, 8), 4);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  EXPECT_EQ(bytes->input, 8u);
  EXPECT_EQ(bytes->output, 32u);

  CollectiveCall empty = AllReduceCall();
  empty.spec.count = 0;
  empty.output_count = 0;
  empty.input = empty.output = nullptr;
  EXPECT_TRUE(ValidateCall(empty, 4).ok()) << "count 0 with null data is fine";
}

TEST(CollectiveCallTest, RejectsBadArguments) {
  CollectiveCall call = AllReduceCall();
  call.spec.name = "";
  EXPECT_TRUE(absl::IsInvalidArgument(ValidateCall(call, 4).status()));
  EXPECT_THAT(std::string(ValidateCall(call, 4).status().message()), HasSubstr("name is empty"));

  call = AllReduceCall();
  call.input = call.output = nullptr;
  ExpectInvalid(call, "null");

  call = AllReduceCall();
  call.spec.dtype = static_cast<DType>(42);
  ExpectInvalid(call, "dtype 42 is unknown");

  call = AllReduceCall();
  call.spec.op = static_cast<ReduceOp>(9);
  ExpectInvalid(call, "op has invalid value 9");

  call = AllReduceCall();
  call.spec.pre_scale = 0;
  ExpectInvalid(call, "pre_scale is 0");

  call = AllReduceCall();
  call.spec.post_scale = std::nan("");
  ExpectInvalid(call, "post_scale is nan");

  call = AllReduceCall();
  call.spec.dtype = DType::kInt32;
  call.spec.post_scale = 0.5;
  ExpectInvalid(call, "scales apply to floating types only");

  call = AllReduceCall();
  call.timeout = absl::Seconds(-1);
  ExpectInvalid(call, "timeout");
  call.timeout = absl::Hours(25);
  ExpectInvalid(call, "must be between zero (the worker's default) and 24h");

  call = AllReduceCall();
  call.spec.name = std::string(1025, 'n');
  ExpectInvalid(call, "name is 1025 bytes long");

  call = AllReduceCall();
  call.spec.count = call.output_count = std::numeric_limits<size_t>::max() / 2;
  ExpectInvalid(call, "is more than 2^40 elements");
}

TEST(CollectiveCallTest, ChecksRootAndGatherShapeAgainstTheRing) {
  CollectiveCall call = AllReduceCall();
  call.spec.kind = CollectiveKind::kBroadcast;
  call.spec.root = 4;
  ExpectInvalid(call, "root 4 is not a rank of this ring of 4");
  call.spec.root = -1;
  ExpectInvalid(call, "root -1");
  call.spec.root = 3;
  EXPECT_TRUE(ValidateCall(call, 4).ok());
  EXPECT_TRUE(absl::IsFailedPrecondition(ValidateCall(call, 0).status()))
      << "no ring: the root cannot be checked";

  ExpectInvalid(AllGatherCall(2, 6), "needs 8 (world size 4 x 2 per rank)");
  ExpectInvalid(AllGatherCall(kMaxCollectiveElements, 8), "needs 4398046511104");
}

TEST(CollectiveCallTest, EncodesEveryField) {
  CollectiveCall call = AllReduceCall();
  call.spec.pre_scale = 0.5;
  call.spec.post_scale = 2;
  call.timeout = absl::Microseconds(1500);
  v1::CollectiveRequest request;
  EncodeRequest(call, &request);
  const v1::CollectiveSpec& spec = request.spec();
  EXPECT_EQ(spec.kind(), v1::COLLECTIVE_KIND_ALL_REDUCE);
  EXPECT_EQ(spec.name(), "grad/fc1");
  EXPECT_EQ(spec.dtype(), v1::DTYPE_FLOAT32);
  EXPECT_EQ(spec.count(), 8u);
  EXPECT_EQ(spec.op(), v1::REDUCE_OP_AVG);
  EXPECT_EQ(spec.pre_scale(), 0.5);
  EXPECT_EQ(spec.post_scale(), 2);
  EXPECT_EQ(request.timeout_ms(), 2) << "rounded up, never down to 0 (= worker default)";
  EXPECT_EQ(request.client_sequence(), 0u) << "numbered when it is issued, not here";
  EXPECT_EQ(request.data_case(), v1::CollectiveRequest::DATA_NOT_SET);
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  EXPECT_TRUE(request.name().empty() && request.count() == 0) << "one spec, not flat fields";
#pragma GCC diagnostic pop

  call.spec.kind = CollectiveKind::kBroadcast;
  call.spec.root = 3;
  call.timeout = absl::ZeroDuration();
  request.Clear();
  EncodeRequest(call, &request);
  EXPECT_EQ(request.spec().kind(), v1::COLLECTIVE_KIND_BROADCAST);
  EXPECT_EQ(request.spec().root(), 3);
  EXPECT_EQ(request.timeout_ms(), 0);
}

TEST(CollectiveCallTest, DescribesTheCollective) {
  EXPECT_EQ(DescribeCall(AllReduceCall()), "collective 'grad/fc1' (allreduce 8 x float32 avg)");
}

}  // namespace
}  // namespace ringsync::internal
