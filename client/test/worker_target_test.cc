#include "client/src/worker_target.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringsync::internal {
namespace {

using ::testing::HasSubstr;

TEST(WorkerTargetTest, UnixForms) {
  for (const char* target : {"unix:/run/w.sock", "/run/w.sock", "unix:///run/w.sock"}) {
    absl::StatusOr<WorkerTarget> parsed = ParseWorkerTarget(target);
    ASSERT_TRUE(parsed.ok()) << target << ": " << parsed.status();
    EXPECT_TRUE(parsed->is_unix()) << target;
    EXPECT_EQ(parsed->unix_socket_path, "/run/w.sock") << target;
    EXPECT_THAT(parsed->WorkerHint(), HasSubstr("--socket=/run/w.sock"));
  }
  EXPECT_EQ(ParseWorkerTarget("/run/w.sock")->grpc_target, "unix:/run/w.sock");
}

TEST(WorkerTargetTest, TcpForms) {
  for (const char* target : {"127.0.0.1:7070", "localhost:7070", "[::1]:7070"}) {
    absl::StatusOr<WorkerTarget> parsed = ParseWorkerTarget(target);
    ASSERT_TRUE(parsed.ok()) << target << ": " << parsed.status();
    EXPECT_FALSE(parsed->is_unix()) << target;
    EXPECT_EQ(parsed->grpc_target, target);
    EXPECT_THAT(parsed->WorkerHint(), HasSubstr(target));
  }
}

TEST(WorkerTargetTest, RejectsWhatCannotBeAWorker) {
  for (const char* target : {"", "localhost", "localhost:", "unix:"}) {
    absl::StatusOr<WorkerTarget> parsed = ParseWorkerTarget(target);
    EXPECT_TRUE(absl::IsInvalidArgument(parsed.status())) << "'" << target << "'";
    EXPECT_THAT(std::string(parsed.status().message()), HasSubstr("bad worker target")) << target;
  }
}

}  // namespace
}  // namespace ringsync::internal
