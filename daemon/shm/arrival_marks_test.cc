// Specification of the arrival marks a client and its worker share (arrival_marks.h).
#include "daemon/shm/arrival_marks.h"

#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <thread>

#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "core/sync/cancellation.h"

namespace ringsync {
namespace {

using ::testing::HasSubstr;

constexpr uint64_t kMiB = uint64_t{1} << 20;

// A page-aligned, shared mapping, as a registered buffer is in both processes.
class SharedPages {
 public:
  explicit SharedPages(size_t bytes)
      : bytes_(bytes),
        data_(static_cast<std::byte*>(
            mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0))) {}
  ~SharedPages() { munmap(data_, bytes_); }
  std::byte* data() const { return data_; }

 private:
  const size_t bytes_;
  std::byte* const data_;
};

WaitLimit Within(absl::Duration timeout, const Cancellation* cancellation = nullptr) {
  return WaitLimit{SteadyDeadline(timeout), cancellation};
}

TEST(ArrivalLayout, AClientCutsATensorIntoAtMostAThousandBlocksOfAtLeast1MiBAndPutsTheMarksAfterIt) {
  const ArrivalLayout small = ClientArrivalLayout(2'100'000);
  EXPECT_EQ(small.block_bytes, kMiB);
  EXPECT_EQ(small.blocks(), 3u);
  EXPECT_EQ(small.marks_offset, 2'100'032u);  // 64-byte aligned, after the tensor
  // The count, the awaited block, a mark per block.
  EXPECT_EQ(ArrivalBufferBytes(2'100'000), 2'100'032u + (2 + 3) * 4);

  const ArrivalLayout large = ClientArrivalLayout(256 * kMiB + 1);
  EXPECT_LE(large.blocks(), 1024u);
  EXPECT_EQ(large.block_bytes % 4096, 0u);
  EXPECT_TRUE(ValidateArrivalLayout(large, ArrivalBufferBytes(256 * kMiB + 1)).ok());
}

TEST(ArrivalLayout, TheWorkerRefusesALayoutOutOfBoundsNamingTheField) {
  const ArrivalLayout good = ClientArrivalLayout(8 * kMiB);
  const uint64_t buffer = ArrivalBufferBytes(8 * kMiB);
  ASSERT_TRUE(ValidateArrivalLayout(good, buffer).ok());

  ArrivalLayout beyond = good;
  beyond.tensor_offset = UINT64_MAX - 10;
  EXPECT_THAT(ValidateArrivalLayout(beyond, buffer).message(),
              HasSubstr("registered.arrival.size_bytes: the tensor's 8388608 bytes at"));

  ArrivalLayout tiny_blocks = good;
  tiny_blocks.block_bytes = 4096;
  EXPECT_THAT(ValidateArrivalLayout(tiny_blocks, buffer).message(),
              HasSubstr("registered.arrival.block_bytes: 4096 is below the least"));

  ArrivalLayout too_many = ClientArrivalLayout(1024 * kMiB);
  too_many.block_bytes = kMinArrivalBlockBytes;  // 16,384 blocks
  EXPECT_THAT(ValidateArrivalLayout(too_many, ArrivalBufferBytes(1024 * kMiB) * 2).message(),
              HasSubstr("at most 4096"));

  ArrivalLayout unaligned = good;
  unaligned.marks_offset += 2;
  EXPECT_THAT(ValidateArrivalLayout(unaligned, buffer + 8).message(),
              HasSubstr("not 4-byte aligned"));

  ArrivalLayout outside = good;
  outside.marks_offset = buffer;
  EXPECT_THAT(ValidateArrivalLayout(outside, buffer).message(), HasSubstr("do not fit"));

  ArrivalLayout wrapping = good;
  wrapping.marks_offset = UINT64_MAX - 3;
  EXPECT_THAT(ValidateArrivalLayout(wrapping, buffer).message(), HasSubstr("do not fit"));

  ArrivalLayout inside_the_tensor = good;
  inside_the_tensor.marks_offset = 4096;
  EXPECT_THAT(ValidateArrivalLayout(inside_the_tensor, buffer).message(),
              HasSubstr("overlap the tensor"));

  ArrivalLayout before_the_tensor = good;  // a tensor at an offset, its marks in front: fine
  before_the_tensor.tensor_offset = 4096;
  before_the_tensor.marks_offset = 0;
  EXPECT_TRUE(ValidateArrivalLayout(before_the_tensor, buffer + 4096).ok());
}

class ArrivalMarksTest : public ::testing::Test {
 protected:
  static constexpr uint64_t kTensor = 1 * kMiB;  // 16 blocks of 64 KiB, the marks after
  ArrivalLayout layout_{0, kTensor, kMinArrivalBlockBytes, kTensor};
  SharedPages pages_{kTensor + layout_.marks_bytes()};
  std::byte* marks_ = pages_.data() + layout_.marks_offset;
  ArrivalMarker marker_{marks_, layout_.blocks()};
  ArrivalMarks marks_seen_{marks_, layout_, nullptr};
};

TEST_F(ArrivalMarksTest, ARangeHasArrivedOnceEveryBlockItTouchesIsMarked) {
  ASSERT_EQ(layout_.blocks(), 16u);
  marker_.Reset();
  EXPECT_TRUE(marks_seen_.AwaitBytes(0, 0, Within(absl::ZeroDuration())).ok());
  marker_.Mark(1);
  marker_.Mark(2);
  const uint64_t block = layout_.block_bytes;
  EXPECT_TRUE(marks_seen_.AwaitBytes(block, 2 * block, Within(absl::ZeroDuration())).ok());
  EXPECT_TRUE(marks_seen_.AwaitBytes(block + 10, 100, Within(absl::ZeroDuration())).ok());
  // One byte into block 3 is not there yet.
  EXPECT_TRUE(absl::IsDeadlineExceeded(
      marks_seen_.AwaitBytes(block, 2 * block + 1, Within(absl::Milliseconds(30)))));
}

TEST_F(ArrivalMarksTest, AWaiterWakesWhenAnotherThreadMarksTheLastBlockItNeeds) {
  marker_.Reset();
  std::thread client([&] {
    for (uint64_t b = 0; b < layout_.blocks(); ++b) {
      absl::SleepFor(absl::Milliseconds(2));
      marker_.Mark(b);
    }
  });
  EXPECT_TRUE(marks_seen_.AwaitBytes(0, kTensor, Within(absl::Seconds(10))).ok());
  client.join();
}

TEST_F(ArrivalMarksTest, AWaiterForALaterBlockSleepsThroughTheMarksBeforeItAndWakesOnItsOwn) {
  marker_.Reset();
  std::thread client([&] {
    for (uint64_t b = 0; b + 1 < layout_.blocks(); ++b) marker_.Mark(b);
    absl::SleepFor(absl::Milliseconds(60));
    marker_.Mark(layout_.blocks() - 1);
  });
  const absl::Time start = absl::Now();
  EXPECT_TRUE(marks_seen_.AwaitBytes(kTensor - 1, 1, Within(absl::Seconds(10))).ok());
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(50)) << "it returned before its block came";
  client.join();
}

TEST_F(ArrivalMarksTest, AWaiterInAnotherProcessWakesOnTheSharedMarks) {
  marker_.Reset();
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {  // the worker: waits for the whole tensor, exits 0 if it arrived
    ArrivalMarks seen(marks_, layout_, nullptr);
    _exit(seen.AwaitBytes(0, kTensor, Within(absl::Seconds(10))).ok() ? 0 : 1);
  }
  absl::SleepFor(absl::Milliseconds(50));  // the child is asleep on the count by now
  for (uint64_t b = 0; b < layout_.blocks(); ++b) marker_.Mark(b);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

TEST_F(ArrivalMarksTest, InputThatNeverArrivesEndsAtTheDeadlineNamingTheMissingBlock) {
  marker_.Reset();
  marker_.Mark(0);
  const absl::Status late = marks_seen_.AwaitBytes(0, kTensor, Within(absl::Milliseconds(50)));
  EXPECT_TRUE(absl::IsDeadlineExceeded(late)) << late;
  EXPECT_THAT(late.message(), HasSubstr("block 1 of 16 (bytes from 65536 of 1048576)"));
  EXPECT_THAT(late.message(), HasSubstr("the training process stalled or gone"));
}

TEST_F(ArrivalMarksTest, ACancellationEndsTheWaitThoughNoMarkWakesIt) {
  marker_.Reset();
  Cancellation cancel;
  std::thread canceller([&] {
    absl::SleepFor(absl::Milliseconds(30));
    cancel.Cancel(absl::CancelledError("client went away"));
  });
  const absl::Status cancelled = marks_seen_.AwaitBytes(0, 10, Within(absl::Seconds(30), &cancel));
  canceller.join();
  EXPECT_TRUE(absl::IsCancelled(cancelled)) << cancelled;
  EXPECT_THAT(cancelled.message(), HasSubstr("block 0 of 16"));
}

TEST_F(ArrivalMarksTest, ARangeOutsideTheTensorIsAnErrorNotARead) {
  marker_.Reset();
  EXPECT_TRUE(absl::IsInternal(marks_seen_.AwaitBytes(kTensor - 1, 2, Within(absl::Seconds(1)))));
  EXPECT_TRUE(absl::IsInternal(marks_seen_.AwaitBytes(SIZE_MAX, 2, Within(absl::Seconds(1)))));
}

}  // namespace
}  // namespace ringsync
