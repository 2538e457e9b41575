// The chaos checks read like the promises they hold the ring to: a collective OK on every
// rank passes; OK on some and failed on others is partial, unless the failing rank lost its
// own worker or was told the outcome is in doubt; failures must name a rank or worker.
#include "tests/chaos/outcome_log.h"

#include "gtest/gtest.h"
#include "tests/chaos/chaos_job.h"

namespace ringsync::chaos {
namespace {

constexpr char kOk0[] = "call k=1 name=step/0 status=ok rank=0 world=2 ms=1.5 t_us=10 slots=0:1,1:1\n";
constexpr char kOk1[] = "call k=1 name=step/0 status=ok rank=1 world=2 ms=1.5 t_us=10 slots=0:1,1:1\n";

std::string Failed(const std::string& flags, const std::string& msg) {
  return "call k=1 name=step/0 status=failed code=ABORTED " + flags +
         " rank=1 world=2 ms=3 t_us=12 msg=" + msg + "\n";
}

TEST(OutcomeLog, ReadsEveryFieldOfACallLine) {
  TrainerLog log = ParseTrainerLog(
      0, std::string("connected rank=0 world=2 generation=1\n") + kOk0 +
             Failed("membership_changed=1 in_doubt=0 lost_worker=0", "rank 1 (generation 2): a b=c") +
             "done steps=1 calls=2 wrong=0\n");
  ASSERT_EQ(log.calls.size(), 2u);
  EXPECT_TRUE(log.calls[0].ok);
  EXPECT_EQ(log.calls[0].slots, (std::map<int, int64_t>{{0, 1}, {1, 1}}));
  EXPECT_DOUBLE_EQ(log.calls[0].ms, 1.5);
  EXPECT_FALSE(log.calls[1].ok);
  EXPECT_TRUE(log.calls[1].membership_changed);
  EXPECT_EQ(log.calls[1].code, "ABORTED");
  EXPECT_EQ(log.calls[1].message, "rank 1 (generation 2): a b=c");
  EXPECT_TRUE(log.done);
  EXPECT_EQ(log.connects, 1);
}

TEST(OutcomeLog, ACollectiveOkOnEveryRankPasses) {
  Verdict v = CheckOutcomes({ParseTrainerLog(0, kOk0), ParseTrainerLog(1, kOk1)});
  EXPECT_EQ(v.ok, 2);
  EXPECT_EQ(v.partial, 0);
  EXPECT_TRUE(v.problems.empty()) << v.Summary();
}

TEST(OutcomeLog, OkOnOneRankAndFailedOnAnotherIsPartial) {
  Verdict v = CheckOutcomes(
      {ParseTrainerLog(0, kOk0),
       ParseTrainerLog(1, Failed("membership_changed=0 in_doubt=0 lost_worker=0", "rank 0 timed out"))});
  EXPECT_EQ(v.partial, 1) << v.Summary();
}

TEST(OutcomeLog, OkWhereTheOtherRankNeverIssuedItIsPartial) {
  Verdict v = CheckOutcomes({ParseTrainerLog(0, kOk0), ParseTrainerLog(1, "")});
  EXPECT_EQ(v.partial, 1) << v.Summary();
}

TEST(OutcomeLog, InDoubtAndALostOwnWorkerAreTheExceptionsCountedApart) {
  Verdict doubt = CheckOutcomes(
      {ParseTrainerLog(0, kOk0),
       ParseTrainerLog(1, Failed("membership_changed=0 in_doubt=1 lost_worker=0", "rank 0 in doubt"))});
  EXPECT_EQ(doubt.partial, 0);
  EXPECT_EQ(doubt.in_doubt, 1);
  Verdict lost = CheckOutcomes(
      {ParseTrainerLog(0, kOk0),
       ParseTrainerLog(1, Failed("membership_changed=0 in_doubt=0 lost_worker=1", "Socket closed"))});
  EXPECT_EQ(lost.partial, 0);
  EXPECT_EQ(lost.lost_worker, 1);
  EXPECT_EQ(lost.unnamed_failures, 0) << "a rank that lost its worker has nobody to name it";
}

TEST(OutcomeLog, AFailureNamingNoRankOrWorkerIsCounted) {
  Verdict v = CheckOutcomes(
      {ParseTrainerLog(0, Failed("membership_changed=0 in_doubt=0 lost_worker=0", "Socket closed"))});
  EXPECT_EQ(v.unnamed_failures, 1);
}

TEST(OutcomeLog, WrongResultsAreCounted) {
  Verdict v = CheckOutcomes({ParseTrainerLog(0, "wrong k=3 name=step/2 why=element 20 is 7\n")});
  EXPECT_EQ(v.wrong, 1);
}

TEST(SumMetric, AddsTheMatchingSeriesOfOneFamilyOnly) {
  const std::string page =
      "# TYPE ringsync_collectives_failed_total counter\n"
      "ringsync_collectives_failed_total{cause=\"peer_lost\",kind=\"allreduce\"} 2\n"
      "ringsync_collectives_failed_total{cause=\"timeout\",kind=\"allreduce\"} 3\n"
      "ringsync_collectives_failed_total_other 100\n"
      "ringsync_ring_generation 7\n";
  EXPECT_EQ(SumMetric(page, "ringsync_collectives_failed_total").value_or(-1), 5);
  EXPECT_EQ(SumMetric(page, "ringsync_collectives_failed_total", "cause=\"timeout\"").value_or(-1), 3);
  EXPECT_EQ(SumMetric(page, "ringsync_ring_generation").value_or(-1), 7);
  EXPECT_TRUE(absl::IsNotFound(SumMetric(page, "ringsync_evictions_total").status()));
}

}  // namespace
}  // namespace ringsync::chaos
