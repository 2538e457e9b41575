// FusionQueue decides which async all-reduces travel together. These tests replace the
// worker with a recorder of the calls it is asked to start.
#include "client/src/fusion_queue.h"

#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringsync::internal {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Records every call started; completes each at once with the next scripted status (OK
// when the script is empty), or holds it when `hold` is set.
class Recorder {
 public:
  FusionQueue::Starter Starter() {
    return [this](CollectiveCall call, std::function<void(const absl::Status&)> on_complete) {
      absl::Status status;
      {
        absl::MutexLock lock(&mu_);
        started_.push_back(Describe(call));
        if (hold_) {
          held_.push_back(std::move(on_complete));
          return;
        }
        if (!script_.empty()) {
          status = script_.front();
          script_.erase(script_.begin());
        }
      }
      on_complete(status);
    };
  }
  // "a,b,c" for a fused call of tensors a, b, c; the name for any other.
  static std::string Describe(const CollectiveCall& call) {
    if (call.spec.members.empty()) return call.spec.name;
    std::string names;
    for (const FusedMember& m : call.spec.members) absl::StrAppend(&names, names.empty() ? "" : ",", m.name);
    return names;
  }
  std::vector<std::string> started() {
    absl::MutexLock lock(&mu_);
    return started_;
  }
  void Script(std::vector<absl::Status> script) {
    absl::MutexLock lock(&mu_);
    script_ = std::move(script);
  }
  void Hold() {
    absl::MutexLock lock(&mu_);
    hold_ = true;
  }
  void ReleaseAll(const absl::Status& status) {
    std::vector<std::function<void(const absl::Status&)>> held;
    {
      absl::MutexLock lock(&mu_);
      hold_ = false;
      held.swap(held_);
    }
    for (auto& done : held) done(status);
  }

 private:
  absl::Mutex mu_;
  std::vector<std::string> started_;
  std::vector<absl::Status> script_;
  bool hold_ = false;
  std::vector<std::function<void(const absl::Status&)>> held_;
};

std::vector<float> data(1 << 20, 1.0f);

CollectiveCall AllReduce(std::string name, size_t count, DType dtype = DType::kFloat32) {
  CollectiveCall call;
  call.spec.kind = CollectiveKind::kAllReduce;
  call.spec.name = std::move(name);
  call.spec.dtype = dtype;
  call.spec.count = count;
  call.input = data.data();
  call.output = data.data();
  call.output_count = count;
  return call;
}

FusionOptions Options(size_t threshold_bytes, absl::Duration cycle_time = absl::Hours(1)) {
  return {.enabled = true, .threshold_bytes = threshold_bytes, .cycle_time = cycle_time};
}

TEST(FusionQueue, WaitingForAResultSendsEverythingQueuedAsOneFusedAllReduce) {
  Recorder recorder;
  FusionQueue queue(Options(1 << 20), recorder.Starter());
  CollectiveHandle a = queue.Submit(AllReduce("a", 10));
  CollectiveHandle b = queue.Submit(AllReduce("b", 20));
  CollectiveHandle c = queue.Submit(AllReduce("c", 30));
  EXPECT_TRUE(recorder.started().empty()) << "nothing goes before the program ends the batch";
  EXPECT_TRUE(b.Wait().ok());
  EXPECT_THAT(recorder.started(), ElementsAre("a,b,c"));
  EXPECT_TRUE(a.Ready());
  EXPECT_TRUE(c.Wait().ok());
}

TEST(FusionQueue, TheThresholdAnotherDtypeAndOtherCollectivesEndABatch) {
  Recorder recorder;
  FusionQueue queue(Options(400), recorder.Starter());  // 100 floats
  std::vector<CollectiveHandle> handles;
  handles.push_back(queue.Submit(AllReduce("a", 60)));
  handles.push_back(queue.Submit(AllReduce("b", 30)));
  handles.push_back(queue.Submit(AllReduce("c", 20)));  // 110 floats > 100: a,b go
  handles.push_back(queue.Submit(AllReduce("d", 5, DType::kFloat64)));  // c goes
  handles.push_back(queue.Submit(AllReduce("big", 100)));  // d goes; big goes alone
  CollectiveCall barrier;
  barrier.spec.kind = CollectiveKind::kBarrier;
  barrier.spec.name = "sync";
  barrier.spec.dtype = DType::kUInt8;
  handles.push_back(queue.Submit(AllReduce("e", 1)));
  handles.push_back(queue.Submit(barrier));  // e goes, then the barrier
  EXPECT_THAT(recorder.started(), ElementsAre("a,b", "c", "d", "big", "e", "sync"));
  for (CollectiveHandle& h : handles) EXPECT_TRUE(h.Wait().ok());
}

TEST(FusionQueue, OneBatchInFlightAtATime) {
  Recorder recorder;
  recorder.Hold();
  FusionQueue queue(Options(1 << 20), recorder.Starter());
  CollectiveHandle a = queue.Submit(AllReduce("a", 1));
  EXPECT_FALSE(a.Ready());  // ends the batch: a goes
  CollectiveHandle b = queue.Submit(AllReduce("b", 1));
  EXPECT_FALSE(b.Ready());
  EXPECT_THAT(recorder.started(), ElementsAre("a"));
  recorder.ReleaseAll(absl::OkStatus());  // a completes, then b goes
  EXPECT_THAT(recorder.started(), ElementsAre("a", "b"));
  EXPECT_TRUE(a.Wait().ok());
  EXPECT_TRUE(b.Wait().ok());
}

TEST(FusionQueue, TheCycleTimeSendsWhatWaitedWithoutTheProgramEndingTheBatch) {
  Recorder recorder;
  FusionQueue queue(Options(1 << 20, absl::Milliseconds(20)), recorder.Starter());
  CollectiveHandle a = queue.Submit(AllReduce("a", 1));
  CollectiveHandle b = queue.Submit(AllReduce("b", 1));
  for (int i = 0; i < 500 && recorder.started().empty(); ++i) absl::SleepFor(absl::Milliseconds(10));
  EXPECT_THAT(recorder.started(), ElementsAre("a,b"));
  EXPECT_TRUE(a.Wait().ok());
}

TEST(FusionQueue, ABatchTheRanksCutDifferentlyGoesAgainWhereTheProgramEndsIt) {
  Recorder recorder;
  // A cycle long enough that a and b are submitted within one even on a loaded machine (at
  // 1 ms, a sanitizer build on 2 busy cores sent "a" alone).
  FusionQueue queue(Options(1 << 20, absl::Milliseconds(50)), recorder.Starter());
  // Another rank sent a different batch: the worker reports a mismatch once.
  recorder.Script({absl::FailedPreconditionError(
      "collective #3 'fused 2 tensors': tensor #2 differs: rank 0 has no tensor #2, rank 1 has "
      "'c' (1 x float32); every rank must pass the same tensors, in the same order, to a fused "
      "all-reduce")});
  CollectiveHandle a = queue.Submit(AllReduce("a", 1));
  CollectiveHandle b = queue.Submit(AllReduce("b", 1));
  for (int i = 0; i < 500 && recorder.started().empty(); ++i) absl::SleepFor(absl::Milliseconds(10));
  absl::SleepFor(absl::Milliseconds(200));  // several cycles: a and b may not go again alone
  EXPECT_THAT(recorder.started(), ElementsAre("a,b"));
  CollectiveHandle c = queue.Submit(AllReduce("c", 1));
  EXPECT_TRUE(c.Wait().ok());  // the program ends the batch
  EXPECT_THAT(recorder.started(), ElementsAre("a,b", "a,b,c"));
  EXPECT_TRUE(a.Wait().ok());
  EXPECT_TRUE(b.Wait().ok());
}

TEST(FusionQueue, ARealMismatchFailsEveryTensorNamingIt) {
  Recorder recorder;
  FusionQueue queue(Options(1 << 20), recorder.Starter());
  const absl::Status mismatch = absl::FailedPreconditionError(
      "collective #3 'fused 2 tensors': tensor #1 differs: rank 0 has 'b' (1 x float32), rank "
      "1 has 'x' (1 x float32); every rank must pass the same tensors, in the same order, to a "
      "fused all-reduce");
  recorder.Script({mismatch, mismatch});
  CollectiveHandle a = queue.Submit(AllReduce("a", 1));
  CollectiveHandle b = queue.Submit(AllReduce("b", 1));
  const absl::Status s = b.Wait();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("tensor 'b' (#1 of 2 fused into one all-reduce): collective #3"));
  EXPECT_THAT(std::string(a.Wait().message()), HasSubstr("tensor #1 differs"));
  EXPECT_THAT(recorder.started(), ElementsAre("a,b", "a,b")) << "put back once, then failed";
}

TEST(FusionQueue, ClosingCancelsWhatIsQueued) {
  Recorder recorder;
  auto queue = std::make_unique<FusionQueue>(Options(1 << 20), recorder.Starter());
  CollectiveCall call = AllReduce("a", 1);
  CollectiveHandle a = queue->Submit(call);
  queue->Close();
  EXPECT_TRUE(a.Ready());
  EXPECT_EQ(a.Wait().code(), absl::StatusCode::kCancelled);
  EXPECT_TRUE(recorder.started().empty());
  EXPECT_EQ(queue->Submit(call).Wait().code(), absl::StatusCode::kCancelled);
}

}  // namespace
}  // namespace ringsync::internal
