// What a pending collective's answer carries, which decides whether its call fits the
// worker's call channel (client_core.cc, SendThroughChannel): a result the worker leaves
// in memory both map comes back as a short answer, whatever the tensor's size.
#include "client/src/pending_collective.h"

#include <stdlib.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace ringsync::internal {
namespace {

constexpr size_t kCount = 1 << 20;  // 4 MiB of float32: more than a call channel record

CollectiveCall AllReduceOf(std::vector<float>& data) {
  CollectiveCall call;
  call.spec.kind = CollectiveKind::kAllReduce;
  call.spec.name = "grad";
  call.spec.dtype = DType::kFloat32;
  call.spec.count = data.size();
  call.input = data.data();
  call.output = data.data();
  call.output_count = data.size();
  return call;
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

}  // namespace
}  // namespace ringsync::internal
