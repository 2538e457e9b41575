// What a worker's Peer service accepts from the network: a stream only from the neighbour
// the ring view names (or, for a stride link, the rank it puts at that stride), at most
// one generation opened ahead of the view, and frames only in sequence order. Each case
// is an attack a stranger on the network could try with the real protocol; after each
// one the ring still computes exact results.
#include <limits>
#include <memory>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/strings/str_cat.h"
#include "core/sync/steady_deadline.h"
#include "daemon/transport/grpc/outbound_stream.h"
#include "daemon/transport/grpc/testing/peer_test_server.h"
#include "wire/grpc_options.h"
#include "daemon/transport/grpc/testing/all_reduce_once.h"
#include "daemon/transport/grpc/testing/grpc_test_ring.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringsync {
namespace {

using ::ringsync::testing::AllReduceOnce;
using ::ringsync::testing::GrpcTestRing;
using ::testing::HasSubstr;

WaitLimit In(absl::Duration d) { return WaitLimit{SteadyDeadline(d)}; }

absl::StatusOr<std::unique_ptr<OutboundStream>> OpenAs(GrpcTestRing& ring, int to_rank,
                                                       const PeerHello& hello) {
  return OutboundStream::Open(ring.server(to_rank).address, hello,
                              absl::StrCat("rank ", to_rank), In(absl::Seconds(10)));
}

// Waits up to 10 s for `happened`, which another thread brings about.
bool WithinTenSeconds(absl::FunctionRef<bool()> happened) {
  for (const SteadyDeadline until(absl::Seconds(10)); !until.Passed();) {
    if (happened()) return true;
    absl::SleepFor(absl::Milliseconds(10));
  }
  return false;
}

// Waits until the receiving side has ended `stream` (its next write fails).
bool EndedByPeer(OutboundStream& stream) {
  return WithinTenSeconds([&] { return stream.broken(); });
}

// Waits until `rank`'s link has seen its stream ended: a stream opened in its name
// replaced it at the receiver. Until then a collective would start on the old stream and
// fail on every rank when the end arrives, as one whose stream breaks does.
bool LinkSawItsStreamReplaced(GrpcTestRing& ring, int rank) {
  return WithinTenSeconds([&] { return ring.link(rank).stream_broken(); });
}

TEST(PeerFencing, AHelloFromAWorkerTheViewDoesNotNameIsRefused) {
  GrpcTestRing ring(3);
  for (const absl::Status& s : ring.Connect(1)) ASSERT_TRUE(s.ok()) << s;

  // Rank 1's view names rank 0 (worker w0) as its left neighbour.
  auto intruder = OpenAs(ring, 1, PeerHello{0, 1, "intruder"});
  ASSERT_FALSE(intruder.ok());
  EXPECT_THAT(std::string(intruder.status().message()),
              HasSubstr("names rank 0 (worker w0) as this worker's left neighbour"));
  auto wrong_rank = OpenAs(ring, 1, PeerHello{2, 1, "w2"});
  ASSERT_FALSE(wrong_rank.ok());
  EXPECT_THAT(std::string(wrong_rank.status().message()),
              HasSubstr("a ring stream from rank 2 for generation 1, whose view lets only rank 0 "
                        "(worker w0) send to this worker"));
  EXPECT_EQ(ring.server(1).refusals.Count("peer_hello_not_in_view"), 2u);

  AllReduceOnce(ring, 10000, 1, 11);
}

TEST(PeerFencing, OneGenerationMayBeOpenedAheadOfTheViewAndIsDroppedWhenTheViewGoesElsewhere) {
  GrpcTestRing ring(3);
  for (const absl::Status& s : ring.Connect(1)) ASSERT_TRUE(s.ok()) << s;

  // A neighbour that learned generation 5 first may open it ahead...
  auto ahead = OpenAs(ring, 1, PeerHello{0, 5, "w0"});
  ASSERT_TRUE(ahead.ok()) << ahead.status();
  // ...but only one generation: hellos for others cannot pin more inboxes.
  for (uint64_t generation : {uint64_t{6}, std::numeric_limits<uint64_t>::max()}) {
    auto another = OpenAs(ring, 1, PeerHello{0, generation, "w0"});
    ASSERT_FALSE(another.ok());
    EXPECT_THAT(std::string(another.status().message()), HasSubstr("one generation ahead at most"));
  }
  EXPECT_EQ(ring.server(1).refusals.Count("generation_ahead"), 2u);

  // Rank 1 learns that the view is generation 2: the inbox opened for 5 is dropped with
  // its stream. (Until then a neighbour's stream for 2 is refused too, and tried again:
  // the worker retries its ring connection until the generation ends.)
  ASSERT_TRUE(ring.server(1).registry.Expect(2, ExpectedSender{0, "w0"}).ok());
  EXPECT_TRUE(EndedByPeer(**ahead));
  for (const absl::Status& s : ring.Connect(2)) ASSERT_TRUE(s.ok()) << s;
  AllReduceOnce(ring, 10000, 1, 12);
}

TEST(PeerFencing, AStreamOpenedAheadByAWorkerTheViewDoesNotNameIsEndedWhenTheViewArrives) {
  GrpcTestRing ring(3);
  for (const absl::Status& s : ring.Connect(1)) ASSERT_TRUE(s.ok()) << s;
  auto impostor = OpenAs(ring, 1, PeerHello{0, 2, "impostor"});
  ASSERT_TRUE(impostor.ok()) << impostor.status();  // the view of generation 2 is not known yet

  // Rank 1 learns the view (before its neighbour's own stream arrives, which would
  // replace the impostor's anyway, as the same rank reconnecting).
  ASSERT_TRUE(ring.server(1).registry.Expect(2, ExpectedSender{0, "w0"}).ok());
  EXPECT_TRUE(EndedByPeer(**impostor));
  EXPECT_EQ(ring.server(1).refusals.Count("peer_hello_not_in_view"), 1u);
  for (const absl::Status& s : ring.Connect(2)) ASSERT_TRUE(s.ok()) << s;
  AllReduceOnce(ring, 10000, 1, 13);
}

TEST(PeerFencing, AFrameThatJumpsTheSequenceIsRefusedAndMovesNoCounter) {
  GrpcTestRing ring(3);
  for (const absl::Status& s : ring.Connect(1)) ASSERT_TRUE(s.ok()) << s;
  // Without authenticated identities (see the Security section of the README) a stranger
  // can claim the neighbour's name; then its frames must still follow the sequence.
  auto stranger = OpenAs(ring, 1, PeerHello{0, 1, "w0"});
  ASSERT_TRUE(stranger.ok()) << stranger.status();
  Frame abort;
  abort.kind = FrameKind::kAbort;
  abort.generation = 1;
  abort.sender_rank = 0;
  abort.sequence = std::numeric_limits<uint64_t>::max();
  abort.abort_reason = "forged";
  (*stranger)->WriteFrame(abort, {}, In(absl::Seconds(10))).IgnoreError();

  EXPECT_TRUE(EndedByPeer(**stranger));
  EXPECT_EQ(ring.server(1).refusals.Count("frame_out_of_sequence"), 1u);
  EXPECT_EQ(ring.link(1).newest_aborted_sequence(), 0u);
  // Rank 0's own stream was replaced by the stranger's; its link opens a new one.
  ASSERT_TRUE(LinkSawItsStreamReplaced(ring, 0));
  AllReduceOnce(ring, 10000, 1, 14);
  AllReduceOnce(ring, 10000, 2, 15);
}

// The doubling's stride links: rank 1 of 5 receives on its ring link from rank 0 and on
// its links of strides 2 and 4 from ranks 4 and 2; nobody else may send to it.
std::vector<ExpectedSender> SendersOfRankOneInFive() {
  return {{0, "w0", 1}, {4, "w4", 2}, {2, "w2", 4}};
}

PeerHello StrideHello(int sender, uint64_t generation, std::string worker, int stride) {
  PeerHello hello{sender, generation, std::move(worker)};
  hello.stride = stride;
  return hello;
}

TEST(PeerFencing, AStrideLinkIsAcceptedOnlyFromTheRankTheViewPutsAtThatStride) {
  GrpcTestRing ring(5);
  for (const absl::Status& s : ring.Connect(1)) ASSERT_TRUE(s.ok()) << s;
  ASSERT_TRUE(
      ring.server(1).registry.Expect(1, ExpectedSender{0, "w0", 1}, SendersOfRankOneInFive()).ok());

  auto stride_two = OpenAs(ring, 1, StrideHello(4, 1, "w4", 2));
  EXPECT_TRUE(stride_two.ok()) << stride_two.status();
  auto wrong_stride = OpenAs(ring, 1, StrideHello(2, 1, "w2", 2));
  ASSERT_FALSE(wrong_stride.ok());
  EXPECT_THAT(std::string(wrong_stride.status().message()),
              HasSubstr("as the link of stride 2, where the view has that rank's link to this "
                        "worker at stride 4"));
  auto stranger = OpenAs(ring, 1, StrideHello(3, 1, "w3", 2));
  ASSERT_FALSE(stranger.ok());
  EXPECT_THAT(std::string(stranger.status().message()),
              HasSubstr("a ring stream from rank 3 for generation 1, whose view lets only "
                        "rank 0 (worker w0), rank 2 (worker w2), rank 4 (worker w4) send"));
  auto impostor = OpenAs(ring, 1, StrideHello(2, 1, "impostor", 4));
  EXPECT_FALSE(impostor.ok());
  EXPECT_EQ(ring.server(1).refusals.Count("peer_hello_not_in_view"), 3u);
  AllReduceOnce(ring, 10000, 1, 16);
}

TEST(PeerFencing, AStrideLinkMaySkipCollectivesButNeverGoesBack) {
  GrpcTestRing ring(5);
  for (const absl::Status& s : ring.Connect(1)) ASSERT_TRUE(s.ok()) << s;
  absl::StatusOr<std::shared_ptr<PeerInbox>> inbox =
      ring.server(1).registry.Expect(1, ExpectedSender{4, "w4", 2}, SendersOfRankOneInFive());
  ASSERT_TRUE(inbox.ok()) << inbox.status();
  auto sender = OpenAs(ring, 1, StrideHello(4, 1, "w4", 2));
  ASSERT_TRUE(sender.ok()) << sender.status();
  Frame commit;
  commit.kind = FrameKind::kCommit;
  commit.generation = 1;
  commit.sender_rank = 4;
  // Collectives the doubling did not run (large ones, on the ring) leave gaps.
  for (uint64_t sequence : {3u, 40u, 41u, 1000u}) {
    commit.sequence = sequence;
    ASSERT_TRUE((*sender)->WriteFrame(commit, {}, In(absl::Seconds(10))).ok());
    absl::StatusOr<ReceivedFrame> received = (*inbox)->Pop(In(absl::Seconds(10)));
    ASSERT_TRUE(received.ok()) << received.status();
    EXPECT_EQ(received->frame.sequence, sequence);
  }
  commit.sequence = 999;
  (*sender)->WriteFrame(commit, {}, In(absl::Seconds(10))).IgnoreError();
  EXPECT_TRUE(EndedByPeer(**sender));
  EXPECT_EQ(ring.server(1).refusals.Count("frame_out_of_sequence"), 1u);
}

TEST(PeerFencing, AMessageLargerThanASegmentIsRefusedUnread) {
  GrpcTestRing ring(2);  // its servers read at most a 1 MiB segment and its header
  for (const absl::Status& s : ring.Connect(1)) ASSERT_TRUE(s.ok()) << s;
  auto stranger = OpenAs(ring, 1, PeerHello{0, 1, "w0"});
  ASSERT_TRUE(stranger.ok()) << stranger.status();
  Frame huge;
  huge.generation = 1;
  huge.sequence = 1;
  const std::vector<std::byte> payload((4 << 20), std::byte{1});
  huge.count = payload.size() / 4;
  (*stranger)->WriteFrame(huge, payload, In(absl::Seconds(10))).IgnoreError();

  EXPECT_TRUE(EndedByPeer(**stranger));
  EXPECT_EQ(ring.link(1).inbound().queued(), 0u);
  ASSERT_TRUE(LinkSawItsStreamReplaced(ring, 0));
  AllReduceOnce(ring, 10000, 1, 16);
}

TEST(PeerFencing, APortInUseIsRefusedNotShared) {
  testing::PeerTestServer first;
  grpc::ServerBuilder builder;
  ConfigureServerBuilder(builder, 1 << 20);
  ListeningPort port;
  port.Add(builder, first.address);
  std::unique_ptr<grpc::Server> second = builder.BuildAndStart();
  EXPECT_TRUE(second == nullptr || !port.BoundAddress().ok())
      << "a second server bound " << first.address;
}

}  // namespace
}  // namespace ringsync
