// Specification of the ring schedule, checked by simulating it: every rank holds a set
// of contributions per chunk, and the simulation moves those sets as the schedule says.
#include "core/ring/schedule.h"

#include <set>
#include <vector>

#include "gtest/gtest.h"
#include "core/ring/partition.h"

namespace ringsync {
namespace {

using Contributions = std::set<int>;  // which ranks' data a chunk copy holds

TEST(Schedule, HasTwiceNMinusOneSteps) {
  EXPECT_EQ(AllReduceSteps(1), 0);
  EXPECT_EQ(AllReduceSteps(2), 2);
  EXPECT_EQ(AllReduceSteps(4), 6);
}

TEST(Schedule, ChunkCStartsAtRankCPlusOneAndEndsAtRankC) {
  // N = 4, rank 1: reduce-scatter sends (r - s - 1), receives (r - s - 2); all-gather
  // sends (r - s), receives (r - s - 1), all mod N. (The seed started chunk c at rank c,
  // which left it finished at rank c-1, one step short of a reduce-scatter's rank c.)
  const int n = 4, r = 1;
  for (int s = 0; s < n - 1; ++s) {
    const RingStep rs = AllReduceStep(r, n, s);
    EXPECT_EQ(rs.phase, RingPhase::kReduceScatter);
    EXPECT_EQ(rs.send_chunk, ((r - s - 1) % n + n) % n);
    EXPECT_EQ(rs.recv_chunk, ((r - s - 2) % n + n) % n);
    const RingStep ag = AllReduceStep(r, n, n - 1 + s);
    EXPECT_EQ(ag.phase, RingPhase::kAllGather);
    EXPECT_EQ(ag.phase_step, s);
    EXPECT_EQ(ag.send_chunk, ((r - s) % n + n) % n);
    EXPECT_EQ(ag.recv_chunk, ((r - s - 1) % n + n) % n);
  }
  for (int n = 1; n <= 16; ++n) {
    for (int rank = 0; rank < n; ++rank) EXPECT_EQ(OwnedChunk(rank, n), rank);
  }
}

TEST(Schedule, WhatARankSendsNextIsWhatItJustReceived) {
  for (int n = 2; n <= 16; ++n) {
    for (int r = 0; r < n; ++r) {
      for (int t = 0; t + 1 < AllReduceSteps(n); ++t) {
        EXPECT_EQ(AllReduceStep(r, n, t + 1).send_chunk, AllReduceStep(r, n, t).recv_chunk)
            << "n " << n << " rank " << r << " step " << t;
      }
    }
  }
}

TEST(Schedule, EachStepReceivesExactlyWhatTheLeftNeighbourSends) {
  for (int n = 2; n <= 16; ++n) {
    for (int r = 0; r < n; ++r) {
      for (int t = 0; t < AllReduceSteps(n); ++t) {
        EXPECT_EQ(AllReduceStep(r, n, t).recv_chunk, AllReduceStep((r + n - 1) % n, n, t).send_chunk);
      }
    }
  }
}

// Simulates the reduce-scatter and all-gather on contribution sets.
TEST(Schedule, SimulationEndsWithEveryRankHoldingEveryContributionInEveryChunk) {
  for (int n = 1; n <= 16; ++n) {
    std::vector<std::vector<Contributions>> held(n, std::vector<Contributions>(n));
    for (int r = 0; r < n; ++r) {
      for (int c = 0; c < n; ++c) held[r][c] = {r};
    }
    for (int t = 0; t < AllReduceSteps(n); ++t) {
      std::vector<std::vector<Contributions>> next = held;
      for (int r = 0; r < n; ++r) {
        const RingStep step = AllReduceStep(r, n, t);
        const Contributions& incoming = held[(r + n - 1) % n][step.recv_chunk];
        if (step.phase == RingPhase::kReduceScatter) {
          // A chunk must never receive a contribution it already holds (no double count).
          for (int who : incoming) {
            EXPECT_EQ(held[r][step.recv_chunk].count(who), 0u) << "n " << n << " step " << t;
          }
          next[r][step.recv_chunk].insert(incoming.begin(), incoming.end());
        } else {
          next[r][step.recv_chunk] = incoming;
        }
      }
      held = next;
      if (t == n - 2) {
        for (int r = 0; r < n; ++r) {
          EXPECT_EQ(held[r][OwnedChunk(r, n)].size(), static_cast<size_t>(n))
              << "after reduce-scatter rank " << r << " must own chunk r fully reduced";
        }
      }
    }
    for (int r = 0; r < n; ++r) {
      for (int c = 0; c < n; ++c) EXPECT_EQ(held[r][c].size(), static_cast<size_t>(n));
    }
  }
}

TEST(Schedule, EachRankSendsTwoNMinusOneOverNOfTheBuffer) {
  for (int n = 1; n <= 16; ++n) {
    for (size_t count : {size_t{0}, size_t{5}, size_t{1000}, size_t{1 << 20}}) {
      for (int r = 0; r < n; ++r) {
        size_t sent = 0;
        for (int t = 0; t < AllReduceSteps(n); ++t) {
          sent += ChunkRange(count, n, AllReduceStep(r, n, t).send_chunk).count;
        }
        const double ideal = 2.0 * (n - 1) / n * static_cast<double>(count);
        // Chunks differ by at most one element; 2(N-1) steps.
        EXPECT_LE(std::abs(static_cast<double>(sent) - ideal), 2.0 * (n - 1))
            << "n " << n << " count " << count;
      }
    }
  }
}

TEST(Schedule, TheInputOrderIsTheChunkSentFirstThenEachChunkCombinedInTheReduceScatter) {
  for (int n = 1; n <= 8; ++n) {
    for (int r = 0; r < n; ++r) {
      std::vector<ElementRange> expected = {ChunkRange(1000, n, AllReduceStep(r, n, 0).send_chunk)};
      for (int t = 0; t < n - 1; ++t) {
        expected.push_back(ChunkRange(1000, n, AllReduceStep(r, n, t).recv_chunk));
      }
      EXPECT_EQ(AllReduceInputOrder(r, n, 1000), expected) << "n " << n << " rank " << r;
      // Every chunk once: all of the input is read before the all-gather overwrites it.
      size_t covered = 0;
      for (const ElementRange& chunk : expected) covered += chunk.count;
      EXPECT_EQ(covered, 1000u);
    }
  }
}

}  // namespace
}  // namespace ringsync
