// Specification of `ringsyncd coordinator` as a process (run through coordinator_smoke,
// which is the coordinator role without the worker linked in): flags, the port file,
// and a clean exit on SIGTERM.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "core/sync/steady_deadline.h"
#include "core/sync/steady_stopwatch.h"
#include "wire/grpc_options.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "ringsync/v1/coordinator.grpc.pb.h"
#include "wire/protocol_version.h"
#include "core/testing/read_file.h"

extern char** environ;

namespace ringsync {
namespace {

using ::testing::HasSubstr;

// A coordinator_smoke process with stderr captured to a file; killed if still running
// when the test ends. `insecure`: add --insecure (these tests are about other flags).
class CoordinatorProcess {
 public:
  explicit CoordinatorProcess(std::vector<std::string> flags, bool insecure = true)
      : dir_(::testing::TempDir()),
        stderr_path_(absl::StrCat(dir_, "/coordinator_", getpid(), "_", ++counter_, ".err")) {
    std::vector<std::string> args = {COORDINATOR_SMOKE_PATH};
    args.insert(args.end(), flags.begin(), flags.end());
    if (insecure) args.push_back("--insecure");
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, stderr_path_.c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0644);
    spawned_ = posix_spawn(&pid_, argv[0], &actions, nullptr, argv.data(), environ) == 0;
    posix_spawn_file_actions_destroy(&actions);
  }

  ~CoordinatorProcess() {
    if (spawned_ && !exit_code_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    unlink(stderr_path_.c_str());
  }

  bool spawned() const { return spawned_; }
  void Signal(int signal_number) { kill(pid_, signal_number); }

  // The exit code, or nullopt if the process is still running after `timeout`.
  std::optional<int> WaitForExit(absl::Duration timeout) {
    const SteadyDeadline deadline(timeout);
    while (!exit_code_ && !deadline.Passed()) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      } else {
        absl::SleepFor(absl::Milliseconds(20));
      }
    }
    return exit_code_;
  }

  std::string Stderr() const { return ReadFile(stderr_path_); }
  const std::string& dir() const { return dir_; }

 private:
  static inline int counter_ = 0;
  std::string dir_;
  std::string stderr_path_;
  pid_t pid_ = 0;
  bool spawned_ = false;
  std::optional<int> exit_code_;
};

// A file a test's process writes (a port file): removed before the test and after it,
// however the test ends. Declare it before the process, so that it outlives the process.
class ScopedFile {
 public:
  explicit ScopedFile(std::string path) : path_(std::move(path)) { unlink(path_.c_str()); }
  ~ScopedFile() { unlink(path_.c_str()); }
  ScopedFile(const ScopedFile&) = delete;
  ScopedFile& operator=(const ScopedFile&) = delete;

  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Polls for the port file; returns its address without the newline, or "".
std::string WaitForPortFile(const std::string& path, absl::Duration timeout) {
  const SteadyDeadline deadline(timeout);
  while (!deadline.Passed()) {
    const std::string text = ReadFile(path);
    if (!text.empty()) {
      EXPECT_EQ(text.back(), '\n');
      return std::string(absl::StripSuffix(text, "\n"));
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  return "";
}

TEST(CoordinatorProcess, RefusesToStartWithoutAuthenticationNamingTheFlags) {
  CoordinatorProcess process({"--world_size=1", "--listen=127.0.0.1:0"}, /*insecure=*/false);
  ASSERT_TRUE(process.spawned());
  EXPECT_EQ(process.WaitForExit(absl::Seconds(10)), 2);
  EXPECT_THAT(process.Stderr(),
              HasSubstr("refusing to serve unauthenticated TCP: pass --tls_ca, --tls_cert and "
                        "--tls_key (mutual TLS; deploy/make-certs.sh makes them), --token_file"));
  EXPECT_THAT(process.Stderr(), HasSubstr("or --insecure"));
}

TEST(CoordinatorProcess, InsecureIsAWarningAtStartUp) {
  const ScopedFile port(
      absl::StrCat(::testing::TempDir(), "/coordinator_insecure_", getpid(), ".port"));
  const std::string& port_file = port.path();
  CoordinatorProcess process(
      {"--world_size=1", "--listen=127.0.0.1:0", absl::StrCat("--port_file=", port_file)});
  ASSERT_TRUE(process.spawned());
  ASSERT_THAT(WaitForPortFile(port_file, absl::Seconds(10)), HasSubstr("127.0.0.1:"));
  EXPECT_THAT(process.Stderr(), HasSubstr("--insecure: serving TCP without authentication"));
  EXPECT_THAT(process.Stderr(), HasSubstr("(no authentication)"));
}

TEST(CoordinatorProcess, ServesOnTheAddressInItsPortFileAndExitsZeroOnSigterm) {
  const ScopedFile port(absl::StrCat(::testing::TempDir(), "/coordinator_", getpid(), ".port"));
  const std::string& port_file = port.path();
  CoordinatorProcess process({"--world_size=1", "--listen=127.0.0.1:0",
                              absl::StrCat("--port_file=", port_file), "--log_level=info"});
  ASSERT_TRUE(process.spawned());
  const std::string address = WaitForPortFile(port_file, absl::Seconds(10));
  ASSERT_THAT(address, HasSubstr("127.0.0.1:")) << process.Stderr();

  auto stub = v1::Coordinator::NewStub(grpc::CreateCustomChannel(
      address, grpc::InsecureChannelCredentials(), ControlChannelArguments()));
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
  v1::JoinRequest request;
  request.set_protocol_version(kProtocolVersion);
  request.set_worker_id("solo");
  request.set_peer_address("127.0.0.1:7501");
  request.set_incarnation(1);
  v1::JoinResponse response;
  const grpc::Status joined = stub->Join(&context, request, &response);
  ASSERT_TRUE(joined.ok()) << joined.error_message();
  EXPECT_EQ(response.world_size(), 1u);

  // A worker keeps a WatchRing stream open; SIGTERM must end it and exit promptly.
  grpc::ClientContext watch_context;
  watch_context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
  v1::WatchRingRequest watch_request;
  watch_request.set_worker_id("solo");
  watch_request.set_session_token(response.session_token());
  auto watch = stub->WatchRing(&watch_context, watch_request);
  v1::RingView view;
  ASSERT_TRUE(watch->Read(&view));
  EXPECT_EQ(view.generation(), 1u);

  const SteadyStopwatch signalled;
  process.Signal(SIGTERM);
  while (watch->Read(&view)) {
  }
  EXPECT_EQ(watch->Finish().error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(process.WaitForExit(absl::Seconds(5)), 0) << process.Stderr();
  // Exit waits at most the 1s shutdown grace: gRPC keeps the process until idle client
  // connections close, and an idle client in another process only notices the server's
  // GOAWAY when it next polls.
  EXPECT_LT(signalled.Elapsed(), absl::Seconds(3));
  const std::string log = process.Stderr();
  EXPECT_THAT(log, HasSubstr("[coordinator] coordinator serving on " + address));
  EXPECT_THAT(log, HasSubstr("worker solo joined"));
  EXPECT_THAT(log, HasSubstr("ring formed: generation 1"));
  EXPECT_THAT(log, HasSubstr("received SIGTERM"));
}

TEST(CoordinatorProcess, WithoutWorldSizeItExitsTwoSayingTheFlagIsRequired) {
  CoordinatorProcess process({"--listen=127.0.0.1:0"});
  ASSERT_TRUE(process.spawned());
  EXPECT_EQ(process.WaitForExit(absl::Seconds(5)), 2);
  EXPECT_THAT(process.Stderr(), HasSubstr("--world_size (or --max_world_size) is required"));
}

TEST(CoordinatorProcess, AFixedAndAnElasticWorldSizeTogetherExitTwo) {
  CoordinatorProcess process({"--world_size=4", "--max_world_size=4", "--listen=127.0.0.1:0"});
  ASSERT_TRUE(process.spawned());
  EXPECT_EQ(process.WaitForExit(absl::Seconds(5)), 2);
  EXPECT_THAT(process.Stderr(), HasSubstr("give either --world_size=4"));
}

TEST(CoordinatorProcess, AMinWorldSizeAboveTheMaxExitsTwoNamingBoth) {
  CoordinatorProcess process(
      {"--min_world_size=5", "--max_world_size=4", "--listen=127.0.0.1:0"});
  ASSERT_TRUE(process.spawned());
  EXPECT_EQ(process.WaitForExit(absl::Seconds(5)), 2);
  EXPECT_THAT(process.Stderr(),
              ::testing::AllOf(HasSubstr("--min_world_size=5"), HasSubstr("--max_world_size=4")));
}

TEST(CoordinatorProcess, AnElasticRingLogsItsRangeAndGrace) {
  const ScopedFile port(
      absl::StrCat(::testing::TempDir(), "/coordinator_elastic_", getpid(), ".port"));
  const std::string& port_file = port.path();
  CoordinatorProcess process({"--min_world_size=2", "--max_world_size=4",
                              "--formation_grace=150ms", "--listen=127.0.0.1:0",
                              absl::StrCat("--port_file=", port_file), "--log_level=info"});
  ASSERT_TRUE(process.spawned());
  ASSERT_FALSE(WaitForPortFile(port_file, absl::Seconds(10)).empty()) << process.Stderr();
  process.Signal(SIGTERM);
  EXPECT_EQ(process.WaitForExit(absl::Seconds(5)), 0) << process.Stderr();
  EXPECT_THAT(process.Stderr(), HasSubstr("world size 2..4, formation grace 150ms"));
}

TEST(CoordinatorProcess, AnUnknownLogLevelExitsTwo) {
  CoordinatorProcess process({"--world_size=1", "--listen=127.0.0.1:0", "--log_level=loud"});
  ASSERT_TRUE(process.spawned());
  EXPECT_EQ(process.WaitForExit(absl::Seconds(5)), 2);
  EXPECT_THAT(process.Stderr(), HasSubstr("--log_level='loud'"));
}

TEST(CoordinatorProcess, ABadHttpListenExitsTwoNamingTheFlag) {
  CoordinatorProcess process({"--world_size=1", "--listen=127.0.0.1:0", "--http_listen=9400"});
  ASSERT_TRUE(process.spawned());
  EXPECT_EQ(process.WaitForExit(absl::Seconds(5)), 2);
  EXPECT_THAT(process.Stderr(), HasSubstr("--http_listen: '9400' is not HOST:PORT: it has no port"));
}

TEST(CoordinatorProcess, AnHttpPortFileWithoutHttpListenExitsTwo) {
  CoordinatorProcess process(
      {"--world_size=1", "--listen=127.0.0.1:0", "--http_port_file=/tmp/never-written"});
  ASSERT_TRUE(process.spawned());
  EXPECT_EQ(process.WaitForExit(absl::Seconds(5)), 2);
  EXPECT_THAT(process.Stderr(), HasSubstr("--http_port_file needs --http_listen"));
}

TEST(CoordinatorProcess, LogJsonWritesOneObjectPerLineAndTheHttpPortFileIsWritten) {
  const std::string base = absl::StrCat(::testing::TempDir(), "/coordinator_json_", getpid());
  const ScopedFile port_file(base + ".port");
  const ScopedFile http_port_file(base + ".http");
  CoordinatorProcess process({"--world_size=1", "--listen=127.0.0.1:0", "--log_json",
                              "--port_file=" + port_file.path(), "--http_listen=127.0.0.1:0",
                              "--http_port_file=" + http_port_file.path()});
  ASSERT_TRUE(process.spawned());
  const std::string address = WaitForPortFile(port_file.path(), absl::Seconds(10));
  ASSERT_FALSE(address.empty()) << process.Stderr();
  // Written before the gRPC port file.
  const std::string http = std::string(absl::StripSuffix(ReadFile(http_port_file.path()), "\n"));
  EXPECT_THAT(http, HasSubstr("127.0.0.1:"));
  process.Signal(SIGTERM);
  EXPECT_EQ(process.WaitForExit(absl::Seconds(5)), 0) << process.Stderr();
  const std::string log = process.Stderr();
  std::istringstream lines(log);
  int count = 0;
  for (std::string line; std::getline(lines, line); ++count) {
    EXPECT_THAT(line, ::testing::StartsWith("{\"time\":\"")) << line;
    EXPECT_THAT(line, HasSubstr(",\"role\":\"coordinator\",\"msg\":\"")) << line;
    EXPECT_EQ(line.back(), '}') << line;
  }
  EXPECT_GE(count, 2) << log;
  EXPECT_THAT(log, HasSubstr(absl::StrCat("\"msg\":\"coordinator serving on ", address)));
  EXPECT_THAT(log, HasSubstr(absl::StrCat("metrics on http://", http, "/metrics")));
}

}  // namespace
}  // namespace ringsync
