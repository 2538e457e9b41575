// The ring all-reduce over real gRPC streams on 127.0.0.1: N ranks in one process, each
// with its own Peer server, ring links connected exactly as the worker connects them —
// every case twice: frames as gRPC messages, and over the same-host path (payload in a
// shared-memory slot ring, frames through its mailbox, the stream only for liveness).
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/reduce/cpu_reducer.h"
#include "core/link/memory_link.h"
#include "core/ring/relay_allreduce.h"
#include "core/ring/ring_allreduce.h"
#include "core/sync/steady_stopwatch.h"
#include "core/testing/ring_test_data.h"
#include "wire/grpc_options.h"
#include "daemon/transport/grpc/grpc_link.h"
#include "daemon/transport/grpc/peer_service.h"
#include "daemon/transport/grpc/testing/grpc_test_ring.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringsync {
namespace {

using ::testing::HasSubstr;
using testing::Bytes;

using ::ringsync::testing::GrpcTestRing;
using ::ringsync::testing::TestTransport;
using RankServer = ::ringsync::testing::PeerTestServer;

// A ring of n ranks whose links of `generation` are connected.
class Ring : public GrpcTestRing {
 public:
  Ring(int n, TestTransport transport, uint64_t generation = 1) : GrpcTestRing(n, transport) {
    for (const absl::Status& s : Connect(generation)) EXPECT_TRUE(s.ok()) << s;
    for (int r = 0; r < n; ++r) {
      EXPECT_EQ(link(r).frames_in_mailbox(), transport.same_host && transport.mailbox_bytes > 0);
    }
  }
};

class GrpcRing : public ::ringsync::testing::EveryTransport {};
INSTANTIATE_TEST_SUITE_P(Transports, GrpcRing, ::ringsync::testing::kEveryTransport,
                         ::ringsync::testing::TransportName);

CollectiveSpec FloatSum(size_t count, uint64_t sequence = 1) {
  CollectiveSpec spec;
  spec.name = "grpc";
  spec.sequence = sequence;
  spec.count = count;
  return spec;
}

TEST_P(GrpcRing, AllReduceMatchesTheInMemoryResultBitForBit) {
  for (int n : {2, 3, 4}) {
    Ring ring(n, transport());
    uint64_t sequence = 0;  // per ring: a new stream may skip only a few collectives
    for (size_t count : {size_t{0}, size_t{1}, size_t{1000}, size_t{300000}}) {
      SCOPED_TRACE(absl::StrCat("n ", n, " count ", count));
      std::vector<Bytes> inputs, buffers;
      for (int r = 0; r < n; ++r) inputs.push_back(testing::RandomInput(DType::kFloat32, count, r, 7));
      buffers = inputs;
      const CollectiveSpec spec = FloatSum(count, ++sequence);
      RingOptions options;
      options.segment_bytes = 64 * 1024;
      std::vector<absl::Status> statuses = SpawnRanks(n, [&](int r) {
        CpuReducer reducer;
        return RingAllReduce(ring.member(r), ring.link(r), reducer, spec,
                             absl::MakeSpan(buffers[r]), options);
      });
      for (const absl::Status& s : statuses) ASSERT_TRUE(s.ok()) << s;
      for (int r = 1; r < n; ++r) EXPECT_TRUE(buffers[r] == buffers[0]);
      // Sum of exact small values? Random floats: compare to a local ring-order fold of
      // the same inputs via the in-memory engine.
      std::vector<Bytes> expected = inputs;
      MemoryRing memory(n);
      SpawnRanks(n, [&](int r) {
        CpuReducer reducer;
        return RingAllReduce(ring.member(r), memory.link(r), reducer, spec,
                             absl::MakeSpan(expected[r]), options);
      });
      EXPECT_TRUE(buffers[0] == expected[0]);
    }
  }
}

// The relay's frames carry whole contributions: inline in a mailbox record when small, in
// a slot when larger, and on the stream behind an empty record when larger than a slot.
void ExpectRelayEqualsTheRing(GrpcTestRing& ring, size_t count, uint64_t sequence) {
  const int n = ring.size();
  std::vector<Bytes> inputs;
  for (int r = 0; r < n; ++r) inputs.push_back(testing::RandomInput(DType::kFloat32, count, r, 3));
  std::vector<Bytes> buffers = inputs, expected = inputs;
  const CollectiveSpec spec = FloatSum(count, sequence);
  std::vector<absl::Status> statuses = SpawnRanks(n, [&](int r) {
    CpuReducer reducer;
    return RelayAllReduce(ring.member(r), ring.link(r), reducer, spec,
                          absl::MakeSpan(buffers[r]), RingOptions{});
  });
  for (const absl::Status& s : statuses) ASSERT_TRUE(s.ok()) << s;
  MemoryRing memory(n);
  SpawnRanks(n, [&](int r) {
    CpuReducer reducer;
    return RingAllReduce(ring.member(r), memory.link(r), reducer, spec,
                         absl::MakeSpan(expected[r]), RingOptions{});
  });
  for (int r = 0; r < n; ++r) EXPECT_TRUE(buffers[r] == expected[0]) << "rank " << r;
}

TEST_P(GrpcRing, RelayAllReduceEqualsTheRingBitForBit) {
  Ring ring(3, transport());
  uint64_t sequence = 0;
  // 4 B .. 56 KB contributions: inline; 120 KB: larger than the test's 64 KiB slots.
  for (size_t count : {size_t{1}, size_t{1000}, size_t{14000}, size_t{30000}, size_t{5}}) {
    SCOPED_TRACE(absl::StrCat("count ", count));
    ExpectRelayEqualsTheRing(ring, count, ++sequence);
  }
}

TEST(SameHostRing, AFrameTooLargeForTheMailboxTravelsInASlotOrOnTheStreamInOrder) {
  for (uint64_t slot_bytes : {uint64_t{256} << 10, uint64_t{64} << 10}) {
    SCOPED_TRACE(absl::StrCat("slots of ", slot_bytes, " bytes"));
    Ring ring(3, TestTransport{.same_host = true, .slot_bytes = slot_bytes});
    uint64_t sequence = 0;
    for (size_t count : {size_t{30000}, size_t{7}, size_t{30000}, size_t{30000}, size_t{3}}) {
      ExpectRelayEqualsTheRing(ring, count, ++sequence);
    }
  }
}

TEST(SameHostRing, WithoutAMailboxFramesStayOnTheStreamAndPayloadInSlots) {
  Ring ring(3, TestTransport{.same_host = true, .mailbox_bytes = 0});
  for (int r = 0; r < 3; ++r) EXPECT_EQ(ring.link(r).transport(), "shm");
  ExpectRelayEqualsTheRing(ring, 1000, 1);
}

// A receiver asks for a data connection on a port the sender cannot reach (it listens on
// 127.0.0.2; the stream came to 127.0.0.1): each sender says so in its log and sends its
// frames on the stream, and the results are the same.
TEST(TcpDataRing, ADataConnectionThatCannotBeMadeLeavesTheFramesOnTheStream) {
  Ring ring(3, TestTransport{.data = true, .data_host = "127.0.0.2", .name = "Unreachable"});
  for (int r = 0; r < 3; ++r) EXPECT_EQ(ring.link(r).transport(), "grpc") << "rank " << r;
  ExpectRelayEqualsTheRing(ring, 30000, 1);
}

TEST(TcpDataRing, EveryLinkSendsItsFramesOnItsDataConnection) {
  for (const auto& transport : {::ringsync::testing::kTcpData, ::ringsync::testing::kTcpSealed}) {
    Ring ring(3, transport);
    for (int r = 0; r < 3; ++r) EXPECT_EQ(ring.link(r).transport(), "tcp") << "rank " << r;
    ExpectRelayEqualsTheRing(ring, 30000, 1);
  }
}

// A chain cuts its data no finer than the ring's links say a frame is worth (ring_broadcast.h).
TEST_P(GrpcRing, EachLinkSaysTheSmallestSegmentWorthAFrameOnItsTransport) {
  Ring ring(3, transport());
  for (int r = 0; r < 3; ++r) {
    const Link& link = ring.link(r);
    EXPECT_EQ(link.min_useful_segment_bytes(),
              link.transport() == "grpc" ? kGrpcMinSegmentBytes : kDefaultMinSegmentBytes)
        << "rank " << r << " on " << link.transport();
  }
}

TEST_P(GrpcRing, ADisagreementIsReportedOnEveryRankOverTheWire) {
  const int n = 3;
  Ring ring(n, transport());
  std::vector<absl::Status> statuses = SpawnRanks(n, [&](int r) {
    CpuReducer reducer;
    const CollectiveSpec spec = FloatSum(r == 1 ? 1000 : 1024);
    Bytes buffer(spec.count * 4);
    return RingAllReduce(ring.member(r), ring.link(r), reducer, spec, absl::MakeSpan(buffer),
                         RingOptions{});
  });
  for (const absl::Status& s : statuses) {
    EXPECT_THAT(std::string(s.message()), HasSubstr("1000 x float32")) << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr("1024 x float32")) << s;
  }
}

TEST_P(GrpcRing, ALostPeerFailsItsNeighboursWithAClearError) {
  const int n = 3;
  Ring ring(n, transport());
  // Rank 2 vanishes: its server stops and its outgoing stream is cancelled.
  ring.server(2).Stop();
  ring.DropLink(2);
  RingOptions options;
  options.timeout = absl::Seconds(5);
  const SteadyStopwatch start;
  std::vector<absl::Status> statuses = SpawnRanks(2, [&](int r) {
    CpuReducer reducer;
    Bytes buffer(4096 * 4);
    return RingAllReduce(ring.member(r), ring.link(r), reducer, FloatSum(4096),
                         absl::MakeSpan(buffer), options);
  });
  EXPECT_LT(start.Elapsed(), options.timeout + absl::Seconds(3));
  for (const absl::Status& s : statuses) EXPECT_FALSE(s.ok());
  // Rank 0 receives from rank 2: its stream ended.
  EXPECT_THAT(std::string(statuses[0].message()), HasSubstr("rank 2")) << statuses[0];
  // Rank 1 sends to rank 2.
  EXPECT_THAT(std::string(statuses[1].message()), HasSubstr("rank 2")) << statuses[1];
}

TEST_P(GrpcRing, APeerLostMidCollectiveFailsItsNeighboursAtOnceNotAtTheDeadline) {
  const int n = 3;
  Ring ring(n, transport());
  RingOptions options;
  options.timeout = absl::Seconds(60);
  options.abort_notice_timeout = absl::Seconds(20);  // a wait on the dead peer would show
  std::jthread killer([&] {
    // Rank 2 never runs the collective; it dies while ranks 0 and 1 wait for it, as a
    // process killed with SIGKILL: its server goes, its stream to rank 0 is reset.
    absl::SleepFor(absl::Milliseconds(300));
    ring.server(2).Stop();
    ring.DropLink(2);
  });
  const SteadyStopwatch start;
  std::vector<absl::Status> statuses = SpawnRanks(2, [&](int r) {
    CpuReducer reducer;
    Bytes buffer(4096 * 4);
    return RingAllReduce(ring.member(r), ring.link(r), reducer, FloatSum(4096),
                         absl::MakeSpan(buffer), options);
  });
  // Neither the deadline nor an abort-notice wait: the broken stream itself is the news.
  EXPECT_LT(start.Elapsed(), absl::Seconds(15));
  // Rank 0 was waiting for rank 2's frames when its stream broke.
  EXPECT_TRUE(absl::IsUnavailable(statuses[0])) << statuses[0];
  EXPECT_THAT(std::string(statuses[0].message()), HasSubstr("from rank 2")) << statuses[0];
  // Rank 1 hears of it from rank 0's abort notice, which names the cause.
  EXPECT_FALSE(statuses[1].ok());
  EXPECT_THAT(std::string(statuses[1].message()), HasSubstr("rank 0 gave up")) << statuses[1];
  EXPECT_THAT(std::string(statuses[1].message()), HasSubstr("rank 2")) << statuses[1];
}

TEST_P(GrpcRing, AnAbortNoticeToADeadPeerFailsAtOnce) {
  Ring ring(2, transport());
  ring.server(1).Stop();
  ring.DropLink(1);
  absl::SleepFor(absl::Milliseconds(300));  // rank 0's stream learns that it broke
  Frame abort;
  abort.kind = FrameKind::kAbort;
  abort.generation = 1;
  abort.sequence = 1;
  abort.abort_origin = 0;
  abort.abort_reason = "test";
  // The stream to rank 1 is gone; a notice that waited for rank 1 to listen again would
  // take the whole limit.
  const SteadyStopwatch start;
  absl::Status sent;
  for (int attempt = 0; attempt < 2 && sent.ok(); ++attempt) {
    sent = ring.link(0).Send(abort, {}, {SteadyDeadline(absl::Seconds(30))});
  }
  EXPECT_FALSE(sent.ok());
  EXPECT_LT(start.Elapsed(), absl::Seconds(15)) << sent;
}

// A rank whose left neighbour connects late fails its attempt to form the ring but keeps
// its stream to the right neighbour for the next attempt: the right neighbour, formed
// already, may be waiting in a collective on it, which a new stream would fail (the
// first collective of a compose cluster once failed that way on every rank).
TEST_P(GrpcRing, AnAttemptThatWaitedInVainForTheLeftNeighbourKeepsTheStreamToTheRight) {
  constexpr uint64_t kGeneration = 1;
  GrpcTestRing ring(2, transport());  // each rank's side connected by hand below
  auto inbox_of = [&](int r) {
    return ring.server(r).registry.Expect(kGeneration,
                                          ExpectedSender{1 - r, absl::StrCat("w", 1 - r)});
  };
  absl::StatusOr<std::shared_ptr<PeerInbox>> inbox0 = inbox_of(0), inbox1 = inbox_of(1);
  ASSERT_TRUE(inbox0.ok() && inbox1.ok());
  const RingMember rank0{0, 2, kGeneration}, rank1{1, 2, kGeneration};

  OutboundEdge opened;
  absl::StatusOr<std::unique_ptr<GrpcLink>> first = ConnectRingLink(
      rank0, ring.neighbours(0), *inbox0, {SteadyDeadline(absl::Milliseconds(300))}, &opened);
  ASSERT_TRUE(absl::IsDeadlineExceeded(first.status())) << first.status();
  EXPECT_THAT(std::string(first.status().message()), HasSubstr("stays open"));
  ASSERT_NE(opened.stream, nullptr);

  // Rank 1 forms its side (rank 0's stream is its inbound) and waits for a frame.
  absl::StatusOr<std::unique_ptr<GrpcLink>> link1 =
      ConnectRingLink(rank1, ring.neighbours(1), *inbox1, {SteadyDeadline(absl::Seconds(10))});
  ASSERT_TRUE(link1.ok()) << link1.status();
  absl::StatusOr<ReceivedFrame> received;
  std::thread receiver([&] { received = (*link1)->Receive({SteadyDeadline(absl::Seconds(10))}); });

  absl::StatusOr<std::unique_ptr<GrpcLink>> link0 = ConnectRingLink(
      rank0, ring.neighbours(0), *inbox0, {SteadyDeadline(absl::Seconds(10))}, &opened);
  ASSERT_TRUE(link0.ok()) << link0.status();
  EXPECT_EQ(opened.stream, nullptr);  // the kept stream went into the link
  Frame frame;
  frame.kind = FrameKind::kAbort;
  frame.generation = kGeneration;
  frame.sequence = 1;
  frame.abort_origin = 0;
  frame.abort_reason = "sent on the kept stream";
  EXPECT_TRUE((*link0)->Send(frame, {}, {SteadyDeadline(absl::Seconds(10))}).ok());
  receiver.join();
  ASSERT_TRUE(received.ok()) << received.status();
  EXPECT_EQ(received->frame.abort_reason, "sent on the kept stream");
}

TEST(GrpcRingStreams, AStreamOfARetiredGenerationIsRefused) {
  RankServer server;
  server.registry.RetireBefore(5, absl::FailedPreconditionError("generation over"));
  absl::StatusOr<std::unique_ptr<OutboundStream>> stream = OutboundStream::Open(
      server.address, PeerHello{0, 4, "w0"}, "rank 1", {SteadyDeadline(absl::Seconds(5))});
  ASSERT_FALSE(stream.ok());
  EXPECT_THAT(std::string(stream.status().message()), HasSubstr("generation 4 is over"));
}

}  // namespace
}  // namespace ringsync
