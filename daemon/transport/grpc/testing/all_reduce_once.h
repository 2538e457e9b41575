// For tests: one float32 SUM all-reduce on every rank of a GrpcTestRing, checked element
// by element against a naive reduction.
#pragma once

#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "core/reduce/cpu_reducer.h"
#include "core/ring/ring_allreduce.h"
#include "core/sync/steady_stopwatch.h"
#include "core/testing/ring_test_data.h"
#include "core/testing/spawn_ranks.h"
#include "daemon/transport/grpc/testing/grpc_test_ring.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringsync::testing {

inline CollectiveSpec FloatSum(size_t count, uint64_t sequence) {
  CollectiveSpec spec;
  spec.name = "stress";
  spec.sequence = sequence;
  spec.count = count;
  return spec;
}

// Runs one float32 SUM all-reduce of `count` elements on every rank of `ring`'s current
// generation; checks every rank's result element by element. `cancel_rank` >= 0 has that
// rank's collective cancelled after `cancel_after`; the result is then only required to
// be a clean success or a clean failure on each rank.
inline void AllReduceOnce(GrpcTestRing& ring, size_t count, uint64_t sequence, uint32_t seed,
                   int cancel_rank = -1, absl::Duration cancel_after = absl::ZeroDuration()) {
  const int n = ring.size();
  std::vector<Bytes> inputs, buffers;
  for (int r = 0; r < n; ++r) inputs.push_back(ExactInput(DType::kFloat32, ReduceOp::kSum, count, r, seed));
  buffers = inputs;
  std::vector<Cancellation> cancellations(static_cast<size_t>(n));
  RingOptions options;
  options.segment_bytes = 4096;  // many frames per collective
  options.timeout = absl::Seconds(20);
  options.abort_notice_timeout = absl::Milliseconds(500);
  std::jthread canceller;
  if (cancel_rank >= 0) {
    canceller = std::jthread([&, cancel_rank, cancel_after] {
      absl::SleepFor(cancel_after);
      cancellations[static_cast<size_t>(cancel_rank)].Cancel(absl::CancelledError("test cancels"));
    });
  }
  const SteadyStopwatch start;
  std::vector<absl::Duration> took(static_cast<size_t>(n));
  std::vector<absl::Status> statuses = SpawnRanks(n, [&](int r) {
    CpuReducer reducer;
    RingOptions mine = options;
    mine.cancellation = &cancellations[static_cast<size_t>(r)];
    absl::Status status = RingAllReduce(ring.member(r), ring.link(r), reducer,
                                        FloatSum(count, sequence),
                                        absl::MakeSpan(buffers[static_cast<size_t>(r)]), mine);
    took[static_cast<size_t>(r)] = start.Elapsed();
    return status;
  });
  // Nothing waits out its deadline: cancellation and aborts end every rank promptly.
  std::string outcomes;
  for (int r = 0; r < n; ++r) {
    absl::StrAppend(&outcomes, "\n  rank ", r, " after ", absl::FormatDuration(took[r]), ": ",
                    statuses[static_cast<size_t>(r)].ToString());
  }
  EXPECT_LT(start.Elapsed(), options.timeout / 2)
      << "cancelled rank " << cancel_rank << " after " << absl::FormatDuration(cancel_after)
      << outcomes;
  if (cancel_rank >= 0) {
    for (const absl::Status& s : statuses) {
      if (s.ok()) continue;
      EXPECT_THAT(std::string(s.message()), ::testing::AnyOf(::testing::HasSubstr("test cancels"), ::testing::HasSubstr("rank ")))
          << s;
    }
    return;
  }
  for (int r = 0; r < n; ++r) ASSERT_TRUE(statuses[static_cast<size_t>(r)].ok()) << statuses[r];
  for (size_t i = 0; i < count; ++i) {
    std::vector<double> values;
    for (int r = 0; r < n; ++r) values.push_back(GetElement(DType::kFloat32, inputs[r], i));
    const double expected = NaiveReduce(DType::kFloat32, ReduceOp::kSum, values);
    for (int r = 0; r < n; ++r) {
      ASSERT_EQ(GetElement(DType::kFloat32, buffers[static_cast<size_t>(r)], i), expected)
          << "rank " << r << " element " << i;
    }
  }
}

}  // namespace ringsync::testing
