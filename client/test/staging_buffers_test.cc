// Registered memory that plain spans are staged in: reused like shared-memory files,
// never handed out while a collective may still write into it, dropped only on the
// caller's thread, and off for good after a refusal that would repeat.
#include "client/src/staging_buffers.h"

#include <memory>
#include <vector>

#include "gtest/gtest.h"

namespace ringsync::internal {
namespace {

constexpr size_t kMiB = size_t{1} << 20;

// Stands in for the worker's registration: makes the memory, counts the calls, and
// refuses with `refusal` when it is set.
struct FakeRegistration {
  int calls = 0;
  absl::Status refusal;

  StagingBuffers::RegisterMemory Function() {
    return [this](size_t size_bytes) -> absl::StatusOr<std::shared_ptr<RegisteredMemory>> {
      ++calls;
      if (!refusal.ok()) return refusal;
      return RegisteredMemory::Create(size_bytes);
    };
  }
};

TEST(StagingBuffers, AReleasedBufferServesTheNextCollectiveOfASimilarSizeWithoutRegistering) {
  FakeRegistration worker;
  StagingBuffers staging(worker.Function());
  absl::StatusOr<std::shared_ptr<RegisteredMemory>> first = staging.Acquire(kMiB);
  ASSERT_TRUE(first.ok()) << first.status();
  RegisteredMemory* const memory = first->get();
  staging.Release(*std::move(first));
  EXPECT_EQ(staging.idle_buffers(), 1u);

  absl::StatusOr<std::shared_ptr<RegisteredMemory>> second = staging.Acquire(kMiB - 100);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->get(), memory);
  EXPECT_EQ(worker.calls, 1);
}

TEST(StagingBuffers, BuffersInUseAreNeverHandedOutTwice) {
  FakeRegistration worker;
  StagingBuffers staging(worker.Function());
  absl::StatusOr<std::shared_ptr<RegisteredMemory>> a = staging.Acquire(kMiB);
  absl::StatusOr<std::shared_ptr<RegisteredMemory>> b = staging.Acquire(kMiB);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(a->get(), b->get());
  EXPECT_EQ(worker.calls, 2);
}

TEST(StagingBuffers, ABufferMoreThanTwiceTheSizeIsNotUsedForASmallTensor) {
  FakeRegistration worker;
  StagingBuffers staging(worker.Function());
  absl::StatusOr<std::shared_ptr<RegisteredMemory>> big = staging.Acquire(8 * kMiB);
  ASSERT_TRUE(big.ok());
  RegisteredMemory* const big_memory = big->get();
  staging.Release(*std::move(big));
  absl::StatusOr<std::shared_ptr<RegisteredMemory>> small = staging.Acquire(kMiB);
  ASSERT_TRUE(small.ok());
  EXPECT_NE(small->get(), big_memory);
  EXPECT_EQ((*small)->size(), kMiB);
}

TEST(StagingBuffers, ARetiredBufferIsNeverReusedAndIsDroppedOnTheNextAcquiresThread) {
  FakeRegistration worker;
  StagingBuffers staging(worker.Function());
  absl::StatusOr<std::shared_ptr<RegisteredMemory>> cancelled = staging.Acquire(kMiB);
  ASSERT_TRUE(cancelled.ok());
  std::weak_ptr<RegisteredMemory> watch = *cancelled;
  // Retire runs on gRPC's callback thread: it must not drop (tell the worker) there.
  staging.Retire(*std::move(cancelled));
  EXPECT_FALSE(watch.expired());
  EXPECT_EQ(staging.idle_buffers(), 0u);

  absl::StatusOr<std::shared_ptr<RegisteredMemory>> next = staging.Acquire(kMiB);
  ASSERT_TRUE(next.ok());
  EXPECT_TRUE(watch.expired());
  EXPECT_EQ(worker.calls, 2) << "the retired buffer was not handed out again";
}

TEST(StagingBuffers, BuffersBeyondTheIdleBoundsAreDroppedOnTheNextAcquiresThread) {
  FakeRegistration worker;
  StagingBuffers staging(worker.Function());
  std::weak_ptr<RegisteredMemory> longest_idle;
  for (size_t bytes : {kMiB, 4 * kMiB}) {  // the second size needs new buffers
    std::vector<std::shared_ptr<RegisteredMemory>> in_use;
    for (size_t i = 0; i < StagingBuffers::kMinIdleBuffers; ++i) {
      absl::StatusOr<std::shared_ptr<RegisteredMemory>> buffer = staging.Acquire(bytes);
      ASSERT_TRUE(buffer.ok());
      in_use.push_back(*std::move(buffer));
    }
    if (longest_idle.expired()) longest_idle = in_use.front();
    for (auto& buffer : in_use) staging.Release(std::move(buffer));
  }
  EXPECT_EQ(staging.idle_buffers(), StagingBuffers::kMinIdleBuffers);
  EXPECT_FALSE(longest_idle.expired()) << "evicted, but dropped only on a caller's thread";
  ASSERT_TRUE(staging.Acquire(4 * kMiB).ok());
  EXPECT_TRUE(longest_idle.expired());
}

TEST(StagingBuffers, EveryBucketOfATrainingStepFindsItsBufferAgainInTheNextStep) {
  // 40 collectives in flight at once, as a step with 40 gradient buckets has them: more
  // than stay idle at least.
  constexpr size_t kBuckets = 40;
  static_assert(kBuckets > StagingBuffers::kMinIdleBuffers);
  FakeRegistration worker;
  StagingBuffers staging(worker.Function());
  for (int step = 0; step < 3; ++step) {
    std::vector<std::shared_ptr<RegisteredMemory>> in_flight;
    for (size_t i = 0; i < kBuckets; ++i) {
      absl::StatusOr<std::shared_ptr<RegisteredMemory>> buffer = staging.Acquire(4 * kMiB);
      ASSERT_TRUE(buffer.ok()) << buffer.status();
      in_flight.push_back(*std::move(buffer));
    }
    for (auto& buffer : in_flight) staging.Release(std::move(buffer));
  }
  EXPECT_EQ(worker.calls, static_cast<int>(kBuckets)) << "registered in the first step only";
}

TEST(StagingBuffers, DroppingTheIdleBuffersLeavesNoneAndTheNextAcquireRegistersAnew) {
  FakeRegistration worker;
  StagingBuffers staging(worker.Function());
  std::vector<std::weak_ptr<RegisteredMemory>> watches;
  std::vector<std::shared_ptr<RegisteredMemory>> in_use;
  for (size_t size : {kMiB, 3 * kMiB, 7 * kMiB}) {
    absl::StatusOr<std::shared_ptr<RegisteredMemory>> buffer = staging.Acquire(size);
    ASSERT_TRUE(buffer.ok());
    watches.push_back(*buffer);
    in_use.push_back(*std::move(buffer));
  }
  absl::StatusOr<std::shared_ptr<RegisteredMemory>> retired = staging.Acquire(kMiB);
  absl::StatusOr<std::shared_ptr<RegisteredMemory>> busy = staging.Acquire(kMiB);
  ASSERT_TRUE(retired.ok() && busy.ok());
  watches.push_back(*retired);
  for (auto& buffer : in_use) staging.Release(std::move(buffer));
  staging.Retire(*std::move(retired));  // waits to be dropped

  EXPECT_EQ(staging.DropIdle(), (1 + 3 + 7 + 1) * kMiB) << "three idle, one retired";
  EXPECT_EQ(staging.idle_buffers(), 0u);
  for (const auto& watch : watches) EXPECT_TRUE(watch.expired()) << "dropped at once";
  EXPECT_EQ(busy->use_count(), 1) << "a buffer in use stays its collective's";
  EXPECT_EQ(staging.DropIdle(), 0u);
  ASSERT_TRUE(staging.Acquire(kMiB).ok());
  EXPECT_EQ(worker.calls, 6);
}

TEST(StagingBuffers, ARefusalThatWouldRepeatTurnsStagingOffAndSaysWhy) {
  FakeRegistration worker;
  worker.refusal = absl::FailedPreconditionError("cannot open the client's memory (pid namespace)");
  StagingBuffers staging(worker.Function());
  EXPECT_TRUE(absl::IsFailedPrecondition(staging.Acquire(kMiB).status()));
  absl::Status again = staging.Acquire(kMiB).status();
  EXPECT_TRUE(absl::IsFailedPrecondition(again));
  EXPECT_NE(again.message().find("pid namespace"), absl::string_view::npos) << again;
  EXPECT_EQ(worker.calls, 1) << "no second registration after a lasting refusal";
}

TEST(StagingBuffers, APassingRefusalFailsOnlyThatAcquire) {
  FakeRegistration worker;
  worker.refusal = absl::ResourceExhaustedError("at most 64 registered buffers per process");
  StagingBuffers staging(worker.Function());
  EXPECT_TRUE(absl::IsResourceExhausted(staging.Acquire(kMiB).status()));
  worker.refusal = absl::OkStatus();
  EXPECT_TRUE(staging.Acquire(kMiB).ok());
  EXPECT_EQ(worker.calls, 2);
}

}  // namespace
}  // namespace ringsync::internal
