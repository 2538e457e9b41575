// The same-host frame path: records come out whole and in order across any number of
// laps, the writer waits for room, a sleeping reader is woken, and nothing a writer
// scribbles into the area makes the reader read outside it.
#include "daemon/shm/frame_mailbox.h"

#include <unistd.h>

#include <cstring>
#include <thread>
#include <vector>

#include "core/sync/steady_deadline.h"
#include "core/sync/steady_stopwatch.h"
#include "daemon/shm/slot_ring.h"
#include "daemon/shm/testing/shm_test_bytes.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringsync {
namespace {

using ::testing::HasSubstr;

constexpr uint64_t kCapacity = 4096;

using testing::kAlive;
using testing::Pattern;
using testing::Within;

struct Area {
  std::vector<std::byte> bytes =
      std::vector<std::byte>(FrameMailboxLayout::AreaBytes(kCapacity));
  absl::Span<std::byte> span() { return absl::MakeSpan(bytes); }
};

absl::Status PutOne(FrameMailboxWriter& writer, absl::Span<const std::byte> record,
                    absl::Duration within = absl::Seconds(5)) {
  const absl::Span<const std::byte> pieces[] = {record};
  return writer.Put(pieces, Within(within), kAlive);
}

TEST(FrameMailbox, RecordsComeOutWholeAndInOrderAcrossManyLaps) {
  Area area;
  FrameMailboxWriter writer(area.span(), kCapacity);
  FrameMailboxReader reader(area.span(), kCapacity);
  // Sizes that do not divide the capacity, so records meet the lap's end everywhere.
  for (int i = 0; i < 500; ++i) {
    const std::vector<std::byte> sent = Pattern((i * 37) % 1500, i);
    ASSERT_TRUE(PutOne(writer, sent).ok());
    absl::StatusOr<std::optional<std::vector<std::byte>>> got = reader.TryTake();
    ASSERT_TRUE(got.ok()) << got.status();
    ASSERT_TRUE(got->has_value()) << "record " << i;
    EXPECT_EQ(**got, sent) << "record " << i;
  }
  EXPECT_FALSE(reader.TryTake()->has_value()) << "nothing more was put";
}

TEST(FrameMailbox, ARecordIsTheConcatenationOfItsPiecesAndMayBeEmpty) {
  Area area;
  FrameMailboxWriter writer(area.span(), kCapacity);
  FrameMailboxReader reader(area.span(), kCapacity);
  const std::vector<std::byte> a = Pattern(5, 1), b = Pattern(11, 2);
  const absl::Span<const std::byte> pieces[] = {a, {}, b};
  ASSERT_TRUE(writer.Put(pieces, Within(absl::Seconds(5)), kAlive).ok());
  ASSERT_TRUE(PutOne(writer, {}).ok());
  std::vector<std::byte> both = a;
  both.insert(both.end(), b.begin(), b.end());
  EXPECT_EQ(**reader.TryTake(), both);
  EXPECT_TRUE(reader.TryTake()->value().empty());
}

TEST(FrameMailbox, TakingIntoABufferReplacesItsContentAndKeepsItsMemory) {
  Area area;
  FrameMailboxWriter writer(area.span(), kCapacity);
  FrameMailboxReader reader(area.span(), kCapacity);
  const std::vector<std::byte> large = Pattern(1500, 3), small = Pattern(7, 4);
  ASSERT_TRUE(PutOne(writer, large).ok());
  ASSERT_TRUE(PutOne(writer, small).ok());
  std::vector<std::byte> record;
  ASSERT_TRUE(*reader.TryTakeInto(record));
  EXPECT_EQ(record, large);
  const std::byte* memory = record.data();
  ASSERT_TRUE(*reader.TryTakeInto(record));
  EXPECT_EQ(record, small);
  EXPECT_EQ(record.data(), memory) << "the second record was taken into new memory";
  EXPECT_FALSE(*reader.TryTakeInto(record)) << "nothing more was put";
  EXPECT_EQ(record, small) << "a take that found nothing changed the buffer";
}

TEST(FrameMailbox, ARecordOverHalfTheUnreservedCapacityIsRefused) {
  Area area;
  FrameMailboxWriter writer(area.span(), kCapacity);
  const absl::Status refused = PutOne(writer, Pattern(writer.max_record_bytes() + 1, 0));
  EXPECT_TRUE(absl::IsInvalidArgument(refused)) << refused;
  EXPECT_TRUE(PutOne(writer, Pattern(writer.max_record_bytes(), 0)).ok());
}

TEST(FrameMailbox, TheWriterWaitsForRoomAndGivesUpAtItsLimit) {
  Area area;
  FrameMailboxWriter writer(area.span(), kCapacity);
  FrameMailboxReader reader(area.span(), kCapacity);
  const std::vector<std::byte> record = Pattern(1000, 3);
  int put = 0;
  while (PutOne(writer, record, absl::Milliseconds(50)).ok()) ++put;
  EXPECT_EQ(put, 3) << "three records of 1008 bytes fill 4096 less its 512-byte reserve";
  const absl::Status full = PutOne(writer, record, absl::Milliseconds(50));
  EXPECT_TRUE(absl::IsDeadlineExceeded(full)) << full;
  // The reserve takes an urgent record (a failure's notice) when nothing else fits.
  const std::vector<std::byte> notice = Pattern(400, 4);
  const absl::Span<const std::byte> urgent[] = {notice};
  EXPECT_TRUE(writer.Put(urgent, Within(absl::Seconds(5)), kAlive, /*urgent=*/true).ok());
  bool gone = true;
  const absl::Span<const std::byte> pieces[] = {record};
  EXPECT_TRUE(absl::IsUnavailable(
      writer.Put(pieces, Within(absl::Seconds(5)), [&gone] { return gone; })));

  // A reader on another thread makes room: the writer goes on, and every record arrives.
  std::thread taker([&reader] {
    int taken = 0;
    const SteadyDeadline deadline(absl::Seconds(20));
    while (taken < 4 + 50 && !deadline.Passed()) {  // 3 records, the notice, 50 more
      absl::StatusOr<std::optional<std::vector<std::byte>>> got = reader.TryTake();
      ASSERT_TRUE(got.ok());
      if (got->has_value()) {
        ++taken;
      } else {
        reader.Wait(reader.doorbell(), absl::Milliseconds(10));
      }
    }
    EXPECT_EQ(taken, 54);
  });
  for (int i = 0; i < 50; ++i) ASSERT_TRUE(PutOne(writer, record, absl::Seconds(20)).ok());
  taker.join();
}

TEST(FrameMailbox, ASleepingReaderIsWokenByAPutAndByRing) {
  Area area;
  FrameMailboxWriter writer(area.span(), kCapacity);
  FrameMailboxReader reader(area.span(), kCapacity);
  for (bool by_ring : {false, true}) {
    const uint32_t seen = reader.doorbell();
    std::thread waker([&] {
      absl::SleepFor(absl::Milliseconds(50));
      if (by_ring) {
        reader.Ring();
      } else {
        ASSERT_TRUE(PutOne(writer, Pattern(8, 0)).ok());
      }
    });
    const SteadyStopwatch start;
    while (reader.doorbell() == seen && start.Elapsed() < absl::Seconds(30)) {
      reader.Wait(seen, absl::Seconds(30));
    }
    EXPECT_LT(start.Elapsed(), absl::Seconds(20)) << (by_ring ? "Ring" : "Put")
                                                      << " did not wake the reader";
    waker.join();
  }
  EXPECT_TRUE(reader.TryTake()->has_value());
}

TEST(FrameMailbox, AScribbledAreaFailsTheReaderInsteadOfMisleadingIt) {
  Area area;
  FrameMailboxWriter writer(area.span(), kCapacity);
  ASSERT_TRUE(PutOne(writer, Pattern(16, 0)).ok());
  // A length that runs past what was written.
  {
    Area copy = area;
    const uint32_t length = 2000;
    std::memcpy(copy.bytes.data() + FrameMailboxLayout::kControlBytes, &length, 4);
    FrameMailboxReader reader(copy.span(), kCapacity);
    absl::StatusOr<std::optional<std::vector<std::byte>>> got = reader.TryTake();
    EXPECT_TRUE(absl::IsDataLoss(got.status())) << got.status();
  }
  // A write position more than a lap ahead.
  {
    Area copy = area;
    const uint64_t position = kCapacity * 3;
    std::memcpy(copy.bytes.data(), &position, 8);
    FrameMailboxReader reader(copy.span(), kCapacity);
    EXPECT_THAT(reader.TryTake().status().message(), HasSubstr("impossible"));
  }
}

TEST(FrameMailbox, TravelsInsideTheSlotRingRegionBetweenTwoMappings) {
  auto sender = SlotRingWriter::Create(2, 4096, 64 << 10).value();
  ASSERT_NE(sender->mailbox(), nullptr);
  auto receiver = SlotRingReader::Attach(sender->offer(), getuid()).value();
  ASSERT_NE(receiver->mailbox(), nullptr);
  const std::vector<std::byte> sent = Pattern(3000, 9);
  ASSERT_TRUE(PutOne(*sender->mailbox(), sent).ok());
  EXPECT_EQ(receiver->mailbox()->TryTake()->value(), sent);
  // Slots and mailbox are apart: a slot's payload does not disturb the frames.
  ASSERT_TRUE(sender->Put(Pattern(4096, 1), Within(absl::Seconds(5)), kAlive).ok());
  EXPECT_FALSE(receiver->mailbox()->TryTake()->has_value());

  auto without = SlotRingWriter::Create(2, 4096).value();
  EXPECT_EQ(without->mailbox(), nullptr);
  EXPECT_EQ(SlotRingReader::Attach(without->offer(), getuid()).value()->mailbox(), nullptr);
  SlotRingOffer lying = sender->offer();
  lying.mailbox_capacity = 0;  // the region says otherwise
  EXPECT_FALSE(SlotRingReader::Attach(lying, getuid()).ok());
  EXPECT_FALSE(SlotRingWriter::Create(2, 4096, 1000).ok()) << "capacity not a multiple of 8";
}

}  // namespace
}  // namespace ringsync
