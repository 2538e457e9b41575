// The gRPC ring streams under churn: collectives started the moment a generation's streams
// open, streams replaced and retired while their acceptance is still in flight, collectives
// cancelled mid-stream, and links whose stream is taken over reopening it under traffic.
//
// Each of these once started a second operation on a reactor before the first completed,
// which gRPC answers by aborting the process (GRPC_CALL_ERROR_TOO_MANY_OPERATIONS), so the
// first thing every test here checks is that the process is still alive. Counts are sized
// to reproduce the abort within a few runs of the old code and to take seconds (see Rounds).
#include <atomic>
#include <map>
#include <random>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/reduce/cpu_reducer.h"
#include "core/ring/ring_allreduce.h"
#include "core/testing/ring_test_data.h"
#include "core/testing/spawn_ranks.h"
#include "daemon/transport/grpc/testing/all_reduce_once.h"
#include "daemon/transport/grpc/testing/grpc_test_ring.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringsync {
namespace {

using ::ringsync::testing::AllReduceOnce;
using ::ringsync::testing::FloatSum;
using ::ringsync::testing::GrpcTestRing;
using ::ringsync::testing::PeerTestServer;
using ::ringsync::testing::TestTransport;
using ::testing::AnyOf;
using ::testing::HasSubstr;

// How many rounds of churn a test runs: `full` — sized to reproduce the old aborts within a
// few runs and to take seconds — except under ThreadSanitizer, where every process runs
// 5-15x slower and a fifth of them is still minutes: its reports come from the
// interleavings, which every round has, not from the count; the other builds run them all.
constexpr int Rounds(int full) {
#if defined(__SANITIZE_THREAD__)
  return full / 5;
#else
  return full;
#endif
}

// The ring's cases run twice: frames as gRPC messages, and over the same-host path (frames
// through the slot ring's mailbox, the stream for the hello and liveness), whose mailbox
// must follow every stream replaced, retired or cancelled exactly as the stream does.
class RingStress : public ::ringsync::testing::EveryTransport {};
INSTANTIATE_TEST_SUITE_P(Transports, RingStress, ::ringsync::testing::kEveryTransport,
                         ::ringsync::testing::TransportName);

TEST_P(RingStress, EveryFreshGenerationCarriesACollectiveTheMomentItConnects) {
  // The first frame follows the hello at once: the peer's acceptance can arrive before
  // the hello's own write completes, and the frame must wait for it.
  constexpr int kGenerations = Rounds(150);
  GrpcTestRing ring(3, transport());
  for (uint64_t generation = 1; generation <= kGenerations; ++generation) {
    SCOPED_TRACE(absl::StrCat("generation ", generation));
    for (const absl::Status& s : ring.Connect(generation)) ASSERT_TRUE(s.ok()) << s;
    AllReduceOnce(ring, generation % 3 == 0 ? 1 : 3000, /*sequence=*/1,
                  static_cast<uint32_t>(generation));
  }
}

TEST(GrpcStreamStress, StreamsReplacedAndRetiredWhileBeingAcceptedEndCleanly) {
  // Several streams claim the same sender at once (each replaces the one before, ending
  // it while its acceptance may be in flight) while the generation is retired under them
  // — in odd rounds at a random moment, in even rounds only once every claim is answered,
  // so both outcomes occur however fast the machine is.
  constexpr int kRounds = Rounds(150);
  constexpr int kContenders = 4;
  PeerTestServer server;
  std::mt19937 rng(11);
  int accepted = 0;
  for (uint64_t generation = 1; generation <= kRounds; ++generation) {
    std::vector<absl::StatusOr<std::unique_ptr<OutboundStream>>> streams(kContenders);
    const absl::Duration retire_after = absl::Microseconds(rng() % 3000);
    auto retire = [&] {
      server.registry.RetireBefore(generation + 1, absl::AbortedError("generation over"));
    };
    {
      std::vector<std::jthread> contenders;
      for (int c = 0; c < kContenders; ++c) {
        contenders.emplace_back([&, c] {
          streams[static_cast<size_t>(c)] =
              OutboundStream::Open(server.address, PeerHello{0, generation, "w0"}, "rank 1",
                                   {SteadyDeadline(absl::Seconds(10))});
        });
      }
      if (generation % 2 == 1) {
        absl::SleepFor(retire_after);
        retire();
      }
    }
    if (generation % 2 == 0) retire();
    for (auto& stream : streams) {
      if (stream.ok()) {
        ++accepted;
        continue;
      }
      EXPECT_THAT(std::string(stream.status().message()),
                  AnyOf(HasSubstr("generation"), HasSubstr("replaced"), HasSubstr("ended")))
          << stream.status();
    }
  }
  // Every even round accepted one at least.
  EXPECT_GE(accepted, kRounds / 2);
  // The server is unharmed: a stream of the next generation is accepted.
  absl::StatusOr<std::unique_ptr<OutboundStream>> next = OutboundStream::Open(
      server.address, PeerHello{0, kRounds + 1, "w0"}, "rank 1", {SteadyDeadline(absl::Seconds(10))});
  EXPECT_TRUE(next.ok()) << next.status();
}

TEST_P(RingStress, CollectivesCancelledMidStreamLeaveTheNextGenerationExact) {
  constexpr int kGenerations = Rounds(40);
  GrpcTestRing ring(4, transport());
  std::mt19937 rng(5);
  for (uint64_t generation = 1; generation <= kGenerations; ++generation) {
    SCOPED_TRACE(absl::StrCat("generation ", generation));
    for (const absl::Status& s : ring.Connect(generation)) ASSERT_TRUE(s.ok()) << s;
    const int victim = static_cast<int>(rng() % 4);
    AllReduceOnce(ring, 64 * 1024, 1, static_cast<uint32_t>(generation), victim,
                  absl::Microseconds(rng() % 4000));
    // The generation's streams carried an abort; the next collective, on a fresh
    // generation as the worker would use after a failure, is exact.
  }
  for (const absl::Status& s : ring.Connect(kGenerations + 1)) ASSERT_TRUE(s.ok()) << s;
  AllReduceOnce(ring, 64 * 1024, 1, 99);
}

TEST_P(RingStress, ALinkWhoseStreamIsTakenOverLosesNoFrameSilently) {
  // Each round is a collective (its own sequence number) whose frames rank 0 sends while a
  // stranger's stream claiming rank 0 takes over rank 1's inbox, ending rank 0's stream.
  // Frames the ended stream carried may be lost, so once a Send of the collective fails,
  // none of its later frames may go out: rank 1 receives a gap-free prefix of every
  // collective. The next collective reopens the stream.
  constexpr int kRounds = Rounds(60);
  constexpr uint32_t kFramesPerRound = 20;
  GrpcTestRing ring(2, transport());
  for (const absl::Status& s : ring.Connect(1)) ASSERT_TRUE(s.ok()) << s;
  std::atomic<bool> sending{true};
  std::map<uint64_t, std::vector<uint32_t>> received;  // sequence -> segments, in order
  std::jthread receiver([&] {
    while (sending.load() || ring.link(1).inbound().queued() > 0) {
      absl::StatusOr<ReceivedFrame> got =
          ring.link(1).Receive({SteadyDeadline(absl::Milliseconds(50))});
      if (got.ok()) received[got->frame.sequence].push_back(got->frame.segment);
    }
  });
  std::vector<std::byte> payload(16 * 1024, std::byte{7});
  bool previous_first_ok = true;
  for (uint64_t sequence = 1; sequence <= kRounds; ++sequence) {
    std::jthread stranger;
    bool failed = false;
    for (uint32_t segment = 0; segment < kFramesPerRound; ++segment) {
      Frame frame;
      frame.sequence = sequence;
      frame.segment = segment;
      frame.count = payload.size() / 4;
      const absl::Status s = ring.link(0).Send(frame, payload, {SteadyDeadline(absl::Seconds(10))});
      if (segment == 0) {
        // The last round's takeover may still be reaching this rank's stream, failing this
        // first frame; then the stream is known broken, and the next round reopens it.
        if (!previous_first_ok) {
          EXPECT_TRUE(s.ok()) << "round " << sequence << ": " << s;
        }
        previous_first_ok = s.ok();
        // Then the stranger strikes, under traffic.
        stranger = std::jthread([&] {
          absl::StatusOr<std::unique_ptr<OutboundStream>> stream =
              OutboundStream::Open(ring.server(1).address, PeerHello{0, 1, "w0"}, "rank 1",
                                   {SteadyDeadline(absl::Seconds(10))});
        });
      }
      if (failed) {
        EXPECT_FALSE(s.ok()) << "round " << sequence << " sent past a failure";
      }
      if (!s.ok()) {
        EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
        failed = true;
      }
    }
    stranger.join();
  }
  sending.store(false);
  receiver.join();
  for (const auto& [sequence, segments] : received) {
    for (size_t i = 0; i < segments.size(); ++i) {
      ASSERT_EQ(segments[i], i) << "collective " << sequence << " has a gap";
    }
  }
}

}  // namespace
}  // namespace ringsync
