// WorkerMetrics: what one finished collective adds, and the ring gauges read at scrape.
#include "daemon/worker/worker_metrics.h"

#include "absl/strings/match.h"
#include "core/outcome.h"
#include "daemon/worker/grpc_link_factory.h"
#include "daemon/metrics/text_page.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringsync {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class WorkerMetricsTest : public ::testing::Test {
 protected:
  WorkerMetricsTest() : ring_("w1", links_, absl::Seconds(1)), metrics_(registry_, ring_, "cpu") {
    epoch_.me = RingMember{1, 4, 7};
    epoch_.worker_ids = {"w0", "w1", "w2", "w3"};
  }

  FinishedCollective AllReduce(uint64_t bytes, absl::Duration elapsed) {
    FinishedCollective c;
    c.kind = CollectiveKind::kAllReduce;
    c.dtype = DType::kFloat32;
    c.bytes = bytes;
    c.epoch = &epoch_;
    c.stats.bytes_sent = bytes * 3 / 2;  // 2(N-1)/N x S for N = 4
    c.stats.bytes_received = bytes * 3 / 2;
    c.stats.overflows = 2;
    c.stats.reduce_time = absl::Milliseconds(250);
    c.stats.input_wait = absl::Milliseconds(125);
    c.elapsed = elapsed;
    return c;
  }

  // GET /metrics of this worker: its registry, then the ring's state.
  std::string Page() const { return metrics::TextPage({&registry_, &metrics_}); }

  InboxRegistry inboxes_{4};
  GrpcLinkFactory links_{"w1", inboxes_};
  RingManager ring_;
  prometheus::Registry registry_;
  WorkerMetrics metrics_;
  RingEpoch epoch_;
};

TEST_F(WorkerMetricsTest, ASuccessfulAllReduceCountsBytesPerNeighbourAndBusBandwidth) {
  metrics_.OnCollectiveFinished(AllReduce(1 << 20, absl::Seconds(1)));
  metrics_.OnCollectiveFinished(AllReduce(1 << 20, absl::Milliseconds(500)));
  const std::string page = Page();
  EXPECT_THAT(page, HasSubstr("ringsync_collectives_total{dtype=\"float32\",kind=\"allreduce\","
                              "result=\"ok\"} 2\n"));
  EXPECT_THAT(page, HasSubstr("ringsync_ring_bytes_sent_total{peer_rank=\"2\",peer_worker_id=\"w2\"} "
                              "3145728\n"));
  EXPECT_THAT(page, HasSubstr("ringsync_ring_bytes_received_total{peer_rank=\"0\","
                              "peer_worker_id=\"w0\"} 3145728\n"));
  // The last one: 1 MiB in 0.5 s x 1.5.
  EXPECT_THAT(page, HasSubstr("ringsync_busbw_bytes_per_second{size_class=\"<16MiB\"} 3145728\n"));
  EXPECT_THAT(page, HasSubstr("ringsync_collective_duration_seconds_count{kind=\"allreduce\"} 2\n"));
  EXPECT_THAT(page, HasSubstr("ringsync_reduce_seconds_total 0.5\n"));
  EXPECT_THAT(page, HasSubstr("ringsync_input_wait_seconds_total 0.25\n"));
  EXPECT_THAT(page, HasSubstr("ringsync_overflows_total 4\n"));
  EXPECT_THAT(page, HasSubstr("ringsync_reduce_device_info{device=\"cpu\"} 1\n"));
}

TEST_F(WorkerMetricsTest, CollectivesAreCountedByHowTheirTensorReachedTheWorker) {
  FinishedCollective staged = AllReduce(4096, absl::Milliseconds(1));
  staged.data_path = "registered";
  metrics_.OnCollectiveFinished(staged);
  metrics_.OnCollectiveFinished(staged);
  FinishedCollective inline_data = AllReduce(16, absl::Milliseconds(1));
  inline_data.data_path = "inline";
  metrics_.OnCollectiveFinished(inline_data);
  const std::string page = Page();
  EXPECT_THAT(page, HasSubstr("ringsync_collective_data_total{path=\"registered\"} 2\n"));
  EXPECT_THAT(page, HasSubstr("ringsync_collective_data_total{path=\"inline\"} 1\n"));
}

TEST_F(WorkerMetricsTest, CollectivesAreCountedByKindAndTheAlgorithmTheyRan) {
  FinishedCollective all_reduce = AllReduce(4096, absl::Milliseconds(1));
  all_reduce.algorithm = "direct";
  metrics_.OnCollectiveFinished(all_reduce);
  FinishedCollective broadcast = AllReduce(4096, absl::Milliseconds(1));
  broadcast.kind = CollectiveKind::kBroadcast;
  broadcast.algorithm = "direct";
  metrics_.OnCollectiveFinished(broadcast);
  broadcast.algorithm = "chain";
  metrics_.OnCollectiveFinished(broadcast);
  const std::string page = Page();
  EXPECT_THAT(page, HasSubstr("ringsync_collective_algorithm_total{algorithm=\"direct\","
                              "kind=\"allreduce\"} 1\n"));
  EXPECT_THAT(page, HasSubstr("ringsync_collective_algorithm_total{algorithm=\"direct\","
                              "kind=\"broadcast\"} 1\n"));
  EXPECT_THAT(page, HasSubstr("ringsync_collective_algorithm_total{algorithm=\"chain\","
                              "kind=\"broadcast\"} 1\n"));
  // The all-reduce family keeps counting all-reduces (and barriers) alone.
  EXPECT_THAT(page, HasSubstr("ringsync_allreduce_algorithm_total{algorithm=\"direct\"} 1\n"));
  EXPECT_THAT(page, Not(HasSubstr("ringsync_allreduce_algorithm_total{algorithm=\"chain\"}")));
}

TEST_F(WorkerMetricsTest, DurationBucketsRunFrom100MicrosecondsToAMinuteBoundsInclusive) {
  metrics_.OnCollectiveFinished(AllReduce(1000, absl::Milliseconds(1)));
  const std::string page = Page();
  const std::string bucket = "ringsync_collective_duration_seconds_bucket{kind=\"allreduce\",le=";
  for (const char* line : {"\"0.0001\"} 0\n", "\"0.0005\"} 0\n", "\"0.001\"} 1\n",
                           "\"2.5\"} 1\n", "\"60\"} 1\n", "\"+Inf\"} 1\n"}) {
    EXPECT_THAT(page, HasSubstr(bucket + line));
  }
  size_t buckets = 0;
  for (size_t at = page.find(bucket); at != std::string::npos; at = page.find(bucket, at + 1)) {
    ++buckets;
  }
  EXPECT_EQ(buckets, 19u);  // 18 bounds and +Inf
}

TEST_F(WorkerMetricsTest, AFailureCountsItsCauseButNoDurationOrBandwidth) {
  FinishedCollective c = AllReduce(1000, absl::Seconds(2));
  c.status = absl::DeadlineExceededError("timed out");
  c.cause = FailureCause::kTimeout;
  metrics_.OnCollectiveFinished(c);
  const std::string page = Page();
  EXPECT_THAT(page, HasSubstr("ringsync_collectives_total{dtype=\"float32\",kind=\"allreduce\","
                              "result=\"failed\"} 1\n"));
  EXPECT_THAT(page, HasSubstr("ringsync_collectives_failed_total{cause=\"timeout\",kind=\"allreduce\"} 1\n"));
  EXPECT_THAT(page, Not(HasSubstr("ringsync_collective_duration_seconds_count")));
  EXPECT_THAT(page, Not(HasSubstr("ringsync_busbw_bytes_per_second{")));
  // Bytes that did move still count.
  EXPECT_THAT(page, HasSubstr("ringsync_ring_bytes_sent_total{peer_rank=\"2\",peer_worker_id=\"w2\"} 1500\n"));
  // A plain failure is not in doubt.
  EXPECT_THAT(page, Not(HasSubstr("ringsync_collectives_in_doubt_total{")));
}

TEST_F(WorkerMetricsTest, AFailureMarkedInDoubtIsCountedAsSuch) {
  FinishedCollective c = AllReduce(1000, absl::Seconds(2));
  c.status = WithOutcomeMark(absl::UnavailableError("did not hear rank 2's commit"),
                             OutcomeMark::kInDoubt);
  c.cause = FailureCause::kPeerLost;
  metrics_.OnCollectiveFinished(c);
  const std::string page = Page();
  EXPECT_THAT(page, HasSubstr("ringsync_collectives_in_doubt_total{kind=\"allreduce\"} 1\n"));
  EXPECT_THAT(page, HasSubstr("ringsync_collectives_failed_total{cause=\"peer_lost\",kind=\"allreduce\"} 1\n"));
}

TEST_F(WorkerMetricsTest, RingGaugesShowAWorkerOutsideARing) {
  const std::string page = Page();
  EXPECT_THAT(page, HasSubstr("ringsync_ring_ready 0\n"));
  EXPECT_THAT(page, HasSubstr("ringsync_ring_rank -1\n"));
  EXPECT_THAT(page, HasSubstr("ringsync_ring_world_size 0\n"));
  EXPECT_THAT(page, HasSubstr("ringsync_ring_generation 0\n"));
  EXPECT_THAT(page, HasSubstr("ringsync_segments_in_flight 0\n"));
  // Present before the first collective, so rate() has a series to work on.
  EXPECT_THAT(page, HasSubstr("ringsync_collectives_total{dtype=\"float32\",kind=\"allreduce\","
                              "result=\"ok\"} 0\n"));
}

TEST(SizeClass, SplitsAtThePowersOfSixteen) {
  EXPECT_EQ(SizeClass(0), "<64KiB");
  EXPECT_EQ(SizeClass(64 * 1024 - 1), "<64KiB");
  EXPECT_EQ(SizeClass(64 * 1024), "<1MiB");
  EXPECT_EQ(SizeClass(1 << 20), "<16MiB");
  EXPECT_EQ(SizeClass(16 << 20), "<256MiB");
  EXPECT_EQ(SizeClass(uint64_t{256} << 20), ">=256MiB");
}

TEST(AllReduceBusBandwidth, IsAlgorithmBandwidthTimesTwoNMinusOneOverN) {
  EXPECT_DOUBLE_EQ(AllReduceBusBandwidth(1000, 4, absl::Seconds(1)), 1500);
  EXPECT_DOUBLE_EQ(AllReduceBusBandwidth(1000, 2, absl::Milliseconds(500)), 2000);
  EXPECT_EQ(AllReduceBusBandwidth(1000, 1, absl::Seconds(1)), 0);
  EXPECT_EQ(AllReduceBusBandwidth(1000, 4, absl::ZeroDuration()), 0);
}

}  // namespace
}  // namespace ringsync
