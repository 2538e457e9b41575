// Specification of the in-memory link: the Link contract (LinkConformance), plus its
// own bound (a queue of a fixed number of frames) and counters.
#include "core/link/memory_link.h"

#include <string>

#include "core/link/testing/link_conformance.h"
#include "gtest/gtest.h"

namespace ringsync {
namespace {

using ::ringsync::testing::LinkConformance;

absl::Span<const std::byte> AsBytes(const std::string& s) {
  return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}

WaitLimit In(absl::Duration d) { return WaitLimit{SteadyDeadline(d), nullptr}; }

class MemoryPair final : public testing::LinkPair {
 public:
  Link& sender() override { return ring_.link(0); }
  Link& receiver() override { return ring_.link(1); }

 private:
  MemoryRing ring_{2};
};

std::unique_ptr<testing::LinkPair> MakeMemoryPair() { return std::make_unique<MemoryPair>(); }

INSTANTIATE_TEST_SUITE_P(Memory, LinkConformance, ::testing::Values(&MakeMemoryPair));

TEST(MemoryLink, CountsTheFramesAndBytesEachRankSent) {
  MemoryRing ring(3);
  for (int i = 0; i < 3; ++i) {
    Frame f;
    f.segment = static_cast<uint32_t>(i);
    ASSERT_TRUE(ring.link(0).Send(f, AsBytes("seg" + std::to_string(i)), In(absl::Seconds(1))).ok());
  }
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<ReceivedFrame> got = ring.link(1).Receive(In(absl::Seconds(1)));
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(got->frame.segment, static_cast<uint32_t>(i));
    const std::vector<std::byte> bytes = got->payload.ToVector();
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size()),
              "seg" + std::to_string(i));
  }
  EXPECT_EQ(ring.bytes_sent(0), 12u);
  EXPECT_EQ(ring.frames_sent(0), 3u);
}

TEST(MemoryLink, SendBlocksWhenTheQueueIsFullAndTimesOut) {
  MemoryRing ring(2, /*capacity_frames=*/2);
  Frame f;
  ASSERT_TRUE(ring.link(0).Send(f, {}, In(absl::Seconds(1))).ok());
  ASSERT_TRUE(ring.link(0).Send(f, {}, In(absl::Seconds(1))).ok());
  const absl::Status third = ring.link(0).Send(f, {}, In(absl::Milliseconds(50)));
  EXPECT_EQ(third.code(), absl::StatusCode::kDeadlineExceeded) << third;
  EXPECT_EQ(ring.high_water_mark(1), 2u);
}

TEST(MemoryLink, AnAbortFrameFitsIntoAFullQueue) {
  MemoryRing ring(2, /*capacity_frames=*/1);
  Frame f;
  ASSERT_TRUE(ring.link(0).Send(f, {}, In(absl::Seconds(1))).ok());
  Frame abort;
  abort.kind = FrameKind::kAbort;
  EXPECT_TRUE(ring.link(0).Send(abort, {}, In(absl::Milliseconds(50))).ok());
}

}  // namespace
}  // namespace ringsync
