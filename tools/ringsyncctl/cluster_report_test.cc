// ringsyncctl status output: the table and the JSON for a cluster built by hand.
#include "tools/ringsyncctl/cluster_report.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringsync {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

v1::ClusterStatus TwoWorkers() {
  v1::ClusterStatus status;
  status.set_world_size(2);
  status.set_generations_published(3);
  status.set_joins_total(4);
  status.mutable_view()->set_generation(3);
  for (int r : {1, 0}) {  // out of order on purpose
    v1::RingMember* m = status.mutable_view()->add_members();
    m->set_rank(r);
    m->set_worker_id(absl::StrCat("w", r));
    m->set_observed_host(absl::StrCat("198.18.0.1", r));
    v1::WorkerStatus* w = status.add_workers();
    w->set_worker_id(absl::StrCat("w", r));
    w->set_rank(r);
    w->set_peer_address(absl::StrCat("127.0.0.1:400", r));
    w->set_ready(true);
    w->set_last_heartbeat_age_ms(250);
    w->set_generation(3);
    w->set_collectives_completed(10 + r);
    w->set_collectives_failed(r);
    w->set_incarnation(0xabc0 + r);
  }
  status.mutable_workers(0)->set_last_error(std::string(200, 'x') + "\"quoted\"");
  return status;
}

TEST(FormatClusterTable, SummarizesTheRingAndListsWorkersInRankOrder) {
  const std::string table = FormatClusterTable("127.0.0.1:7400", TwoWorkers());
  std::vector<std::string> lines = absl::StrSplit(table, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 4u) << table;
  EXPECT_EQ(lines[0],
            "coordinator 127.0.0.1:7400: ring formed, generation 3, 2 of 2 workers joined "
            "(4 joins, 3 views published)");
  EXPECT_THAT(lines[1], StartsWith("RANK  WORKER  INCARNATION       ADDRESS         JOINED FROM  "
                                   "HTTP  READY  HEARTBEAT  GEN  DONE  FAILED  LAST ERROR"));
  EXPECT_EQ(lines[2], "0     w0      000000000000abc0  127.0.0.1:4000  198.18.0.10  -     yes    "
                      "0.2s       3    10    0       -");
  EXPECT_THAT(lines[3], StartsWith("1     w1      000000000000abc1  127.0.0.1:4001  198.18.0.11  -     "
                                   "yes    0.2s       3    11    1       xxx"));
  EXPECT_THAT(lines[3], HasSubstr("..."));
  EXPECT_LT(lines[3].size(), 200u);  // the 208-character error is cut to 80
}

TEST(FormatClusterTable, ShowsWhereEachWorkerJoinedFromOnlyWhileItIsInTheView) {
  v1::ClusterStatus status = TwoWorkers();
  status.mutable_view()->mutable_members()->RemoveLast();  // w0 left the view
  status.mutable_workers(1)->set_rank(-1);
  const std::string table = FormatClusterTable("c:1", status);
  EXPECT_THAT(table, HasSubstr("\n1     w1      000000000000abc1  127.0.0.1:4001  198.18.0.11  "));
  EXPECT_THAT(table, HasSubstr("\n-     w0      000000000000abc0  127.0.0.1:4000  -            "));
}

TEST(FormatClusterTable, ShowsAnElasticRangeAndTheLastChange) {
  v1::ClusterStatus status = TwoWorkers();
  status.set_min_world_size(2);
  status.set_max_world_size(4);
  status.set_world_size(4);
  status.mutable_view()->set_change_reason("worker w2 (rank 2) missed heartbeats for 5s; "
                                           "re-formed with 2 workers");
  const std::string table = FormatClusterTable("c:1", status);
  EXPECT_THAT(table, HasSubstr("2 of 2..4 workers joined"));
  EXPECT_THAT(table, HasSubstr("\nlast change: worker w2 (rank 2) missed heartbeats for 5s; "
                               "re-formed with 2 workers\n"));
}

TEST(FormatClusterTable, SaysWhyTheRingIsNotFormed) {
  v1::ClusterStatus status;
  status.set_world_size(4);
  status.mutable_view()->set_generation(2);
  status.mutable_view()->set_dissolved_reason("worker w3 (rank 3) missed heartbeats for 5s");
  const std::string table = FormatClusterTable("c:1", status);
  EXPECT_THAT(table, HasSubstr("ring NOT formed (generation 2: worker w3 (rank 3) missed "
                               "heartbeats for 5s), 0 of 4 workers joined"));
  EXPECT_THAT(table, HasSubstr("(no worker has joined)"));
}

TEST(FormatClusterJson, HasNumbersAndWholeEscapedErrors) {
  const std::string json = FormatClusterJson("127.0.0.1:7400", TwoWorkers());
  EXPECT_THAT(json, StartsWith("{\"coordinator\":\"127.0.0.1:7400\",\"world_size\":2,"
                               "\"generation\":3,\"formed\":true,\"dissolved_reason\":\"\","
                               "\"generations_published\":3,\"joins_total\":4,"
                               "\"min_world_size\":0,\"max_world_size\":0,\"change_reason\":\"\","
                               "\"membership_changes_total\":0,\"views_adopted_total\":0,"
                               "\"workers\":[{\"rank\":0,\"worker_id\":\"w0\","
                               "\"incarnation\":\"000000000000abc0\""));
  EXPECT_THAT(json, HasSubstr("\"collectives_completed\":11,\"collectives_failed\":1,"
                              "\"last_error\":\"" + std::string(200, 'x') +
                              "\\\"quoted\\\"\",\"ring_settings\":{}}"));
  EXPECT_THAT(json, HasSubstr("\"last_heartbeat_age_seconds\":0.250"));
  EXPECT_THAT(json, HasSubstr("\"peer_address\":\"127.0.0.1:4001\",\"joined_from\":\"198.18.0.11\","));
}

TEST(FormatClusterTable, ShowsTheRingSettingsTheWorkersJoinedWith) {
  v1::ClusterStatus status = TwoWorkers();
  EXPECT_THAT(FormatClusterTable("c:1", status), Not(HasSubstr("ring settings")))
      << "workers of an older release state none";
  for (v1::WorkerStatus& w : *status.mutable_workers()) {
    for (const auto& [flag, value] : {std::pair{"--segment_bytes", "1048576"},
                                      std::pair{"--algorithm", "auto"}}) {
      v1::RingSetting* s = w.add_ring_settings();
      s->set_flag(flag);
      s->set_value(value);
    }
  }
  EXPECT_THAT(FormatClusterTable("c:1", status),
              HasSubstr("published)\nring settings: --segment_bytes=1048576 --algorithm=auto\n"
                        "RANK"));
  EXPECT_THAT(FormatClusterJson("c:1", status),
              HasSubstr("\"ring_settings\":{\"--segment_bytes\":\"1048576\","
                        "\"--algorithm\":\"auto\"}}"));
}

}  // namespace
}  // namespace ringsync
