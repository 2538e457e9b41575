#include "client/src/worker_status.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringsync::internal {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

WorkerTarget Target() { return *ParseWorkerTarget("unix:/run/ringsync/worker.sock"); }

TEST(WorkerStatusTest, ABrokenChannelSaysTheWorkerIsLostAndHowToStartIt) {
  absl::Status status =
      FromWorkerStatus(grpc::Status(grpc::StatusCode::UNAVAILABLE, "Socket closed"), Target());
  EXPECT_TRUE(absl::IsUnavailable(status));
  EXPECT_THAT(status.message(), HasSubstr("Socket closed (lost the worker at unix:"));
  EXPECT_THAT(status.message(), HasSubstr("--socket=/run/ringsync/worker.sock"));
}

TEST(WorkerStatusTest, TheWorkersOwnVerdictKeepsItsMessageAndCode) {
  const char* ring_failure =
      "rank 1 (generation 1, collective #254 'step'): the ring stream to rank 2 (worker w2) "
      "at w2:7401 failed";
  absl::Status status = FromWorkerStatus(
      grpc::Status(grpc::StatusCode::UNAVAILABLE, ring_failure), Target(),
      /*reported_by_worker=*/true);
  EXPECT_TRUE(absl::IsUnavailable(status));
  EXPECT_EQ(status.message(), ring_failure);
  EXPECT_THAT(status.message(), Not(HasSubstr("lost the worker")));
}

TEST(WorkerStatusTest, DeadlinesSayWhatToTryWhoeverReportsThem) {
  for (bool reported_by_worker : {false, true}) {
    absl::Status status =
        FromWorkerStatus(grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "too slow"),
                         Target(), reported_by_worker);
    EXPECT_TRUE(absl::IsDeadlineExceeded(status));
    EXPECT_THAT(status.message(), HasSubstr("raise its timeout"));
  }
}

TEST(WorkerStatusTest, OkStaysOk) {
  EXPECT_TRUE(FromWorkerStatus(grpc::Status::OK, Target()).ok());
}

}  // namespace
}  // namespace ringsync::internal
