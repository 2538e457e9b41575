// What a pending collective's answer carries, which decides whether its call fits the
// worker's call channel (client_core.cc, SendThroughChannel): a result the worker leaves
// in memory both map comes back as a short answer, whatever the tensor's size. And what
// it does in a caller's registered buffer, where the worker runs the collective.
#include "client/src/pending_collective.h"

#include <stdlib.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ringsync/registered_buffer.h"

namespace ringsync::internal {
namespace {

constexpr size_t kCount = 1 << 20;  // 4 MiB of float32: more than a call channel record

// A call of `kind` on float32: `count` elements in, `output_count` out.
CollectiveCall FloatCall(CollectiveKind kind, const float* input, size_t count, float* output,
                         size_t output_count) {
  CollectiveCall call;
  call.spec.kind = kind;
  call.spec.name = std::string(CollectiveKindName(kind));
  call.spec.dtype = DType::kFloat32;
  call.spec.count = count;
  call.input = input;
  call.output = output;
  call.output_count = output_count;
  return call;
}

CollectiveCall AllReduceOf(std::vector<float>& data) {
  return FloatCall(CollectiveKind::kAllReduce, data.data(), data.size(), data.data(), data.size());
}

TEST(PendingCollective, AnInlineTensorComesBackInTheAnswer) {
  std::vector<float> data(kCount, 1.0f);
  PendingCollective pending(AllReduceOf(data), CallBytes{kCount * 4, kCount * 4});
  pending.PrepareData(nullptr);
  EXPECT_EQ(pending.answer_data_bytes(), kCount * 4);
}

TEST(PendingCollective, ATensorInARegisteredBufferOrASharedFileLeavesTheAnswerEmpty) {
  std::vector<float> data(kCount, 1.0f);
  PendingCollective registered(AllReduceOf(data), CallBytes{kCount * 4, kCount * 4});
  registered.UseRegistered(/*id=*/7, /*offset=*/0);
  EXPECT_EQ(registered.answer_data_bytes(), 0u);

  std::string dir = "/dev/shm/ringsync-pending-test-XXXXXX";
  ASSERT_NE(::mkdtemp(dir.data()), nullptr);
  {
    PendingCollective in_file(AllReduceOf(data), CallBytes{kCount * 4, kCount * 4});
    in_file.PrepareData(std::make_shared<SharedMemoryPool>(dir));
    EXPECT_TRUE(in_file.request()->has_shared());
    EXPECT_EQ(in_file.answer_data_bytes(), 0u);
  }
  std::filesystem::remove_all(dir);
}

// In a caller's registered buffer: an all-gather's input goes into the output's first slot
// (unless it lies there), a reduce-scatter's block is moved to the output when the worker
// ran it as another rank, and a result the SDK cannot take says the buffer is not the
// input any more.
TEST(PendingCollective, AnAllGatherInARegisteredOutputTakesItsInputIntoTheFirstSlot) {
  std::vector<float> output(12, 0.0f), input = {1, 2, 3, 4};
  CollectiveCall call = FloatCall(CollectiveKind::kAllGather, input.data(), 4, output.data(), 12);
  PendingCollective apart(call, CallBytes{16, 48});
  apart.UseRegistered(/*id=*/7, /*offset=*/0);
  EXPECT_EQ(std::vector<float>(output.begin(), output.begin() + 4), input);
  EXPECT_TRUE(apart.wrote_registered());

  call.input = output.data();  // rank 0's own slot: nothing to copy
  PendingCollective in_place(call, CallBytes{16, 48});
  in_place.UseRegistered(/*id=*/7, /*offset=*/0);
  EXPECT_FALSE(in_place.wrote_registered());
}

CollectiveCall ReduceScatterInPlace(std::vector<float>& buffer, size_t block, int rank) {
  return FloatCall(CollectiveKind::kReduceScatter, buffer.data(), buffer.size(),
                   buffer.data() + rank * block, block);
}

TEST(PendingCollective, AReduceScatterInPlaceTakesItsBlockFromWhereTheWorkerLeftIt) {
  std::vector<float> buffer = {0, 0, 1, 1, 2, 2};  // three blocks of two
  auto pending = std::make_shared<PendingCollective>(ReduceScatterInPlace(buffer, 2, 1),
                                                     CallBytes{24, 8});
  pending->UseRegistered(/*id=*/7, /*offset=*/0);
  pending->response()->set_result_offset(16);  // the worker ran it as rank 2
  pending->response()->set_result_bytes(8);
  CollectiveHandle handle = PendingCollective::MakeHandle(pending);
  pending->Finish(absl::OkStatus(), /*worker_done=*/true);
  ASSERT_TRUE(handle.Wait().ok());
  EXPECT_EQ(buffer[2], 2.0f) << "block 2 moved to the output, block 1";
  EXPECT_EQ(buffer[3], 2.0f);
}

TEST(PendingCollective, AResultTheSdkCannotTakeFromARegisteredBufferSaysItIsNotUntouched) {
  std::vector<float> buffer(6, 1.0f);
  auto pending = std::make_shared<PendingCollective>(ReduceScatterInPlace(buffer, 2, 0),
                                                     CallBytes{24, 8});
  pending->UseRegistered(/*id=*/7, /*offset=*/0);
  pending->response()->set_result_bytes(12);  // a ring of two, where the call had three
  CollectiveHandle handle = PendingCollective::MakeHandle(pending);
  pending->Finish(absl::OkStatus(), /*worker_done=*/true);
  const absl::Status status = handle.Wait();
  EXPECT_TRUE(absl::IsInternal(status)) << status;
  EXPECT_THAT(std::string(status.message()), ::testing::HasSubstr("as the worker left it"));
  EXPECT_FALSE(RegisteredBufferUntouched(status));
}

}  // namespace
}  // namespace ringsync::internal
