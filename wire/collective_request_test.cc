// A worker request's spec: read from `spec`, or from the flat fields of older SDKs, with
// the same checks either way.
#include "wire/collective_request.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringsync {
namespace {

using ::testing::StartsWith;

CollectiveSpec Broadcast() {
  CollectiveSpec spec;
  spec.kind = CollectiveKind::kBroadcast;
  spec.name = "weights/fc1";
  spec.sequence = 99;
  spec.dtype = DType::kBFloat16;
  spec.count = 12;
  spec.root = 2;
  return spec;
}

TEST(CollectiveRequestSpec, RoundTripsThroughTheRequest) {
  v1::CollectiveRequest request;
  SetRequestSpec(Broadcast(), &request);
  EXPECT_EQ(request.spec().sequence(), 0u) << "the ring numbers collectives, not the client";
  absl::StatusOr<CollectiveSpec> spec = SpecOfRequest(CollectiveKind::kBroadcast, request);
  ASSERT_TRUE(spec.ok()) << spec.status();
  CollectiveSpec expected = Broadcast();
  expected.sequence = 0;
  EXPECT_EQ(*spec, expected);
}

TEST(CollectiveRequestSpec, AnUnevenAllToAllsSplitSizesRoundTripAndAreBounded) {
  CollectiveSpec uneven;
  uneven.kind = CollectiveKind::kAllToAll;
  uneven.name = "tokens";
  uneven.send_counts = {3, 0, 5};
  uneven.receive_counts = {1, 2, 0};
  uneven.count = 8;
  v1::CollectiveRequest request;
  SetRequestSpec(uneven, &request);
  absl::StatusOr<CollectiveSpec> spec = SpecOfRequest(CollectiveKind::kAllToAll, request);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(*spec, uneven);

  request.mutable_spec()->set_count(9);
  spec = SpecOfRequest(CollectiveKind::kAllToAll, request);
  EXPECT_THAT(std::string(spec.status().message()),
              StartsWith("send_counts add up to 8, not to count 9"));
  for (size_t i = 0; i <= kMaxAllToAllSplits; ++i) request.mutable_spec()->add_send_counts(0);
  spec = SpecOfRequest(CollectiveKind::kAllToAll, request);
  EXPECT_THAT(std::string(spec.status().message()), StartsWith("split sizes list more than 4096"));
}

TEST(CollectiveRequestSpec, ReadsTheFlatFieldsOfOlderSdks) {
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  v1::CollectiveRequest request;
  request.set_name("grad/fc1");
  request.set_dtype(v1::DTYPE_FLOAT32);
  request.set_count(8);
  request.set_op(v1::REDUCE_OP_AVG);
  request.set_post_scale(0.5);
#pragma GCC diagnostic pop
  absl::StatusOr<CollectiveSpec> spec = SpecOfRequest(CollectiveKind::kAllReduce, request);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->kind, CollectiveKind::kAllReduce) << "the RPC's kind";
  EXPECT_EQ(spec->name, "grad/fc1");
  EXPECT_EQ(spec->count, 8u);
  EXPECT_EQ(spec->op, ReduceOp::kAvg);
  EXPECT_EQ(spec->pre_scale, 1.0) << "0 on the wire means unset";
  EXPECT_EQ(spec->post_scale, 0.5);
}

TEST(CollectiveRequestSpec, ABarrierNeedsNoDtype) {
  v1::CollectiveRequest request;
  request.mutable_spec()->set_name("epoch-end");
  absl::StatusOr<CollectiveSpec> spec = SpecOfRequest(CollectiveKind::kBarrier, request);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->kind, CollectiveKind::kBarrier);
  EXPECT_EQ(spec->count, 0u);
}

TEST(CollectiveRequestSpec, RefusesASpecOfAnotherKindOrInvalid) {
  v1::CollectiveRequest request;
  SetRequestSpec(Broadcast(), &request);
  absl::StatusOr<CollectiveSpec> spec = SpecOfRequest(CollectiveKind::kAllReduce, request);
  EXPECT_TRUE(absl::IsInvalidArgument(spec.status()));
  EXPECT_EQ(spec.status().message(),
            "spec.kind is broadcast but the request came by the allreduce RPC");

  request.mutable_spec()->set_root(-3);
  spec = SpecOfRequest(CollectiveKind::kBroadcast, request);
  EXPECT_THAT(std::string(spec.status().message()), StartsWith("root -3 is negative"));

  request.mutable_spec()->set_root(0);
  request.mutable_spec()->set_name(std::string(kMaxCollectiveNameBytes + 1, 'x'));
  spec = SpecOfRequest(CollectiveKind::kBroadcast, request);
  EXPECT_THAT(std::string(spec.status().message()), StartsWith("name is 1025 bytes long"));

  request.mutable_spec()->set_name("n");
  request.mutable_spec()->set_kind(static_cast<v1::CollectiveKind>(77));
  spec = SpecOfRequest(CollectiveKind::kBroadcast, request);
  EXPECT_THAT(std::string(spec.status().message()), StartsWith("spec.kind 77 is unknown"));

  v1::CollectiveRequest barrier;
  barrier.mutable_spec()->set_name("b");
  barrier.mutable_spec()->set_count(4);
  spec = SpecOfRequest(CollectiveKind::kBarrier, barrier);
  EXPECT_THAT(std::string(spec.status().message()), StartsWith("count is 4; a barrier"));
}

}  // namespace
}  // namespace ringsync
