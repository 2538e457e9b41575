// The same-host payload path: what a sender puts in a slot is what the receiver takes,
// slots come back when the receiver lets go, and nothing a peer names can make the
// receiver read outside its mapping.
#include "daemon/shm/slot_ring.h"

#include <unistd.h>

#include <cstring>
#include <thread>
#include <vector>

#include "daemon/shm/host_identity.h"
#include "daemon/shm/testing/shm_test_bytes.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringsync {
namespace {

using ::testing::HasSubstr;

using testing::kAlive;
using testing::Pattern;
using testing::Within;

TEST(HostIdentity, AProcessIsOnItsOwnHost) {
  const HostIdentity me = HostIdentity::Local();
  EXPECT_TRUE(me.SameHostAs(HostIdentity::Local()));
  HostIdentity other = me;
  other.boot_id = "another-boot";
  EXPECT_FALSE(me.SameHostAs(other));
  other = me;
  other.ipc_namespace += 1;
  EXPECT_FALSE(me.SameHostAs(other));
  EXPECT_FALSE(HostIdentity().SameHostAs(HostIdentity())) << "unknown never matches";
}

TEST(SlotRing, WhatTheSenderPutsIsWhatTheReceiverTakesAndSlotsComeBack) {
  auto writer = SlotRingWriter::Create(2, 8192).value();
  auto reader = SlotRingReader::Attach(writer->offer(), getuid()).value();
  for (int round = 0; round < 6; ++round) {
    const std::vector<std::byte> sent = Pattern(8192 - round, round);
    absl::StatusOr<uint32_t> slot = writer->Put(sent, Within(absl::Seconds(5)), kAlive);
    ASSERT_TRUE(slot.ok()) << slot.status();
    EXPECT_EQ(*slot, static_cast<uint32_t>(round % 2));
    absl::StatusOr<SlotRingReader::Payload> got = reader->Take(*slot, sent.size());
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(std::memcmp(got->bytes.data(), sent.data(), sent.size()), 0);
  }  // each payload's storage is dropped here: its slot is free again
}

TEST(SlotRing, TheSenderWaitsForTheReceiverToFreeASlot) {
  auto writer = SlotRingWriter::Create(1, 4096).value();
  auto reader = SlotRingReader::Attach(writer->offer(), getuid()).value();
  const std::vector<std::byte> data = Pattern(100, 1);
  ASSERT_TRUE(writer->Put(data, Within(absl::Seconds(5)), kAlive).ok());
  SlotRingReader::Payload held = reader->Take(0, 100).value();
  absl::StatusOr<uint32_t> blocked = writer->Put(data, Within(absl::Milliseconds(50)), kAlive);
  EXPECT_TRUE(absl::IsDeadlineExceeded(blocked.status())) << blocked.status();
  EXPECT_TRUE(absl::IsUnavailable(
      writer->Put(data, Within(absl::Seconds(5)), [] { return true; }).status()))
      << "a receiver whose stream ended will never free it";
  std::thread release([&] {
    absl::SleepFor(absl::Milliseconds(20));
    held = SlotRingReader::Payload();
  });
  EXPECT_TRUE(writer->Put(data, Within(absl::Seconds(5)), kAlive).ok());
  release.join();
}

TEST(SlotRing, ASlotWhoseHeaderWasNeverSentComesBackToTheSender) {
  auto writer = SlotRingWriter::Create(1, 4096).value();
  auto reader = SlotRingReader::Attach(writer->offer(), getuid()).value();
  const std::vector<std::byte> data = Pattern(100, 2);
  const uint32_t slot = writer->Put(data, Within(absl::Seconds(5)), kAlive).value();
  writer->Unput(slot);
  EXPECT_FALSE(reader->Take(slot, 100).ok()) << "an unsent slot cannot be taken";
  EXPECT_TRUE(writer->Put(data, Within(absl::Milliseconds(50)), kAlive).ok())
      << "the ring does not wait on it when it comes round";
  writer->Unput(7);  // outside the ring: ignored
}

TEST(SlotRing, EveryFieldOfAFrameIsCheckedAgainstTheReceiversGeometry) {
  auto writer = SlotRingWriter::Create(2, 4096).value();
  auto reader = SlotRingReader::Attach(writer->offer(), getuid()).value();
  EXPECT_THAT(reader->Take(0, 10).status().message(), HasSubstr("not filled"));
  ASSERT_TRUE(writer->Put(Pattern(10, 0), Within(absl::Seconds(5)), kAlive).ok());
  EXPECT_FALSE(reader->Take(2, 10).ok()) << "slot index past the ring";
  EXPECT_FALSE(reader->Take(~uint64_t{0}, 10).ok());
  EXPECT_FALSE(reader->Take(0, 4097).ok()) << "more bytes than a slot holds";
  SlotRingReader::Payload first = reader->Take(0, 10).value();
  EXPECT_THAT(reader->Take(0, 10).status().message(), HasSubstr("not filled"))
      << "a slot is taken once per fill";
}

TEST(SlotRing, AnOfferIsCheckedBeforeAnythingIsMapped) {
  auto writer = SlotRingWriter::Create(2, 4096).value();
  const SlotRingOffer good = writer->offer();
  auto refused = [&](auto mutate) {
    SlotRingOffer offer = good;
    mutate(offer);
    return !SlotRingReader::Attach(offer, getuid()).ok();
  };
  EXPECT_TRUE(refused([](SlotRingOffer& o) { o.token[0] = o.token[0] == 'a' ? 'b' : 'a'; }))
      << "the token names the sender's own memfd";
  EXPECT_TRUE(refused([](SlotRingOffer& o) { o.token = "../../etc/passwd"; }));
  EXPECT_TRUE(refused([](SlotRingOffer& o) { o.slot_count = 3; }));
  EXPECT_TRUE(refused([](SlotRingOffer& o) { o.slot_count = 1000; }));
  EXPECT_TRUE(refused([](SlotRingOffer& o) { o.slot_bytes = 1; }));
  EXPECT_TRUE(refused([](SlotRingOffer& o) { o.region_bytes += 4096; }));
  EXPECT_TRUE(refused([](SlotRingOffer& o) { o.fd = 0; }));
  EXPECT_TRUE(refused([](SlotRingOffer& o) { o.fd = -1; }));
  EXPECT_TRUE(refused([](SlotRingOffer& o) { o.pid = 0; }));
  EXPECT_TRUE(refused([](SlotRingOffer& o) { o.pid = int64_t{1} << 40; }));
  EXPECT_FALSE(SlotRingReader::Attach(good, getuid() + 1).ok()) << "another user's memory";
  EXPECT_TRUE(SlotRingReader::Attach(good, getuid()).ok());
}

}  // namespace
}  // namespace ringsync
