// ringsync-test-client: a stand-in training process for tests that must kill one.
// Connects to a worker, prints "ready rank=R", then runs float32 SUM all-reduces of
// --elements, printing "starting N" before each, until --iterations are done; then stays
// attached for --linger.
#include <cstdio>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/time/clock.h"
#include "ringsync/client.h"

ABSL_FLAG(std::string, worker, "", "SDK target of the worker");
ABSL_FLAG(int64_t, elements, 1 << 20, "float32 elements per all-reduce");
ABSL_FLAG(int, iterations, 1, "all-reduces to run");
ABSL_FLAG(std::string, name, "step", "collective name");
ABSL_FLAG(absl::Duration, linger, absl::ZeroDuration(),
          "stay attached this long after the last all-reduce (a test may kill it meanwhile)");

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  absl::StatusOr<std::unique_ptr<ringsync::Client>> client =
      ringsync::Client::Connect(absl::GetFlag(FLAGS_worker));
  if (!client.ok()) {
    std::fprintf(stderr, "connect: %s\n", std::string(client.status().message()).c_str());
    return 1;
  }
  std::printf("ready rank=%d\n", (*client)->rank());
  std::fflush(stdout);
  std::vector<float> tensor(static_cast<size_t>(absl::GetFlag(FLAGS_elements)), 1.0f);
  for (int i = 0; i < absl::GetFlag(FLAGS_iterations); ++i) {
    std::printf("starting %d\n", i);
    std::fflush(stdout);
    absl::Status s = (*client)->AllReduce(absl::GetFlag(FLAGS_name), absl::MakeSpan(tensor),
                                          ringsync::ReduceOp::kSum);
    std::printf("finished %d: %s\n", i, s.ok() ? "ok" : std::string(s.message()).c_str());
    std::fflush(stdout);
    if (!s.ok()) return 1;
  }
  std::printf("lingering\n");
  std::fflush(stdout);
  absl::SleepFor(absl::GetFlag(FLAGS_linger));
  return 0;
}
