// The ring all-reduce over real gRPC streams on 127.0.0.1: N ranks in one process, each
// with its own Peer server, ring links connected exactly as the worker connects them.
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/reduce/cpu_reducer.h"
#include "core/link/memory_link.h"
#include "core/ring/ring_allreduce.h"
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
using RankServer = ::ringsync::testing::PeerTestServer;

// A ring of n ranks whose links of `generation` are connected.
class GrpcRing : public GrpcTestRing {
 public:
  explicit GrpcRing(int n, uint64_t generation = 1) : GrpcTestRing(n) {
    for (const absl::Status& s : Connect(generation)) EXPECT_TRUE(s.ok()) << s;
  }
};

CollectiveSpec FloatSum(size_t count, uint64_t sequence = 1) {
  CollectiveSpec spec;
  spec.name = "grpc";
  spec.sequence = sequence;
  spec.count = count;
  return spec;
}

TEST(GrpcRing, AllReduceMatchesTheInMemoryResultBitForBit) {
  for (int n : {2, 3, 4}) {
    GrpcRing ring(n);
    for (size_t count : {size_t{0}, size_t{1}, size_t{1000}, size_t{300000}}) {
      SCOPED_TRACE(absl::StrCat("n ", n, " count ", count));
      std::vector<Bytes> inputs, buffers;
      for (int r = 0; r < n; ++r) inputs.push_back(testing::RandomInput(DType::kFloat32, count, r, 7));
      buffers = inputs;
      static uint64_t sequence = 0;
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

TEST(GrpcRing, ADisagreementIsReportedOnEveryRankOverTheWire) {
  const int n = 3;
  GrpcRing ring(n);
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

TEST(GrpcRing, ALostPeerFailsItsNeighboursWithAClearError) {
  const int n = 3;
  GrpcRing ring(n);
  // Rank 2 vanishes: its server stops and its outgoing stream is cancelled.
  ring.server(2).Stop();
  ring.DropLink(2);
  RingOptions options;
  options.timeout = absl::Seconds(5);
  const absl::Time start = absl::Now();
  std::vector<absl::Status> statuses = SpawnRanks(2, [&](int r) {
    CpuReducer reducer;
    Bytes buffer(4096 * 4);
    return RingAllReduce(ring.member(r), ring.link(r), reducer, FloatSum(4096),
                         absl::MakeSpan(buffer), options);
  });
  EXPECT_LT(absl::Now() - start, options.timeout + absl::Seconds(3));
  for (const absl::Status& s : statuses) EXPECT_FALSE(s.ok());
  // Rank 0 receives from rank 2: its stream ended.
  EXPECT_THAT(std::string(statuses[0].message()), HasSubstr("rank 2")) << statuses[0];
  // Rank 1 sends to rank 2.
  EXPECT_THAT(std::string(statuses[1].message()), HasSubstr("rank 2")) << statuses[1];
}

TEST(GrpcRing, APeerLostMidCollectiveFailsItsNeighboursAtOnceNotAtTheDeadline) {
  const int n = 3;
  GrpcRing ring(n);
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
  const absl::Time start = absl::Now();
  std::vector<absl::Status> statuses = SpawnRanks(2, [&](int r) {
    CpuReducer reducer;
    Bytes buffer(4096 * 4);
    return RingAllReduce(ring.member(r), ring.link(r), reducer, FloatSum(4096),
                         absl::MakeSpan(buffer), options);
  });
  // Neither the deadline nor an abort-notice wait: the broken stream itself is the news.
  EXPECT_LT(absl::Now() - start, absl::Seconds(15));
  // Rank 0 was waiting for rank 2's frames when its stream broke.
  EXPECT_TRUE(absl::IsUnavailable(statuses[0])) << statuses[0];
  EXPECT_THAT(std::string(statuses[0].message()), HasSubstr("from rank 2")) << statuses[0];
  // Rank 1 hears of it from rank 0's abort notice, which names the cause.
  EXPECT_FALSE(statuses[1].ok());
  EXPECT_THAT(std::string(statuses[1].message()), HasSubstr("rank 0 gave up")) << statuses[1];
  EXPECT_THAT(std::string(statuses[1].message()), HasSubstr("rank 2")) << statuses[1];
}

TEST(GrpcRing, AnAbortNoticeToADeadPeerFailsAtOnce) {
  GrpcRing ring(2);
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
  const absl::Time start = absl::Now();
  absl::Status sent;
  for (int attempt = 0; attempt < 2 && sent.ok(); ++attempt) {
    sent = ring.link(0).Send(abort, {}, {absl::Now() + absl::Seconds(30)});
  }
  EXPECT_FALSE(sent.ok());
  EXPECT_LT(absl::Now() - start, absl::Seconds(15)) << sent;
}

TEST(GrpcRing, AStreamOfARetiredGenerationIsRefused) {
  RankServer server;
  server.registry.RetireBefore(5, absl::FailedPreconditionError("generation over"));
  absl::StatusOr<std::unique_ptr<OutboundStream>> stream = OutboundStream::Open(
      server.address, PeerHello{0, 4, "w0"}, "rank 1", {absl::Now() + absl::Seconds(5)});
  ASSERT_FALSE(stream.ok());
  EXPECT_THAT(std::string(stream.status().message()), HasSubstr("generation 4 is over"));
}

}  // namespace
}  // namespace ringsync
