// ringsyncd: the ringsync daemon. One binary, two roles:
//   ringsyncd coordinator --world_size=4 --listen=0.0.0.0:7400
//   ringsyncd worker --coordinator=HOST:7400 --worker_id=w0 --socket=/run/ringsync/w0.sock
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/synchronization/mutex.h"
#include "daemon/coordinator/coordinator_main.h"
#include "daemon/process/help_filter.h"
#include "daemon/worker/worker_main.h"
#include "wire/grpc_options.h"

namespace {

constexpr char kUsage[] =
    "ringsync daemon.\n"
    "  ringsyncd coordinator [flags]   rendezvous and membership: assigns ranks, publishes ring views\n"
    "  ringsyncd worker [flags]        one per training process: joins the ring, serves the SDK\n"
    "Flags of both roles are listed below; each role reads its own.";

}  // namespace

int main(int argc, char** argv) {
  ringsync::UseSystemResolverUnlessConfigured();
  // Debian's Abseil is built with Mutex deadlock detection on: every lock and unlock then
  // updates one process-wide lock graph under a global lock, which showed in the profile
  // of a 64 MiB all-reduce (gRPC's threads and the ring's take a mutex per segment). The
  // unit tests, which run the same code in-process, keep it.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  absl::SetProgramUsageMessage(kUsage);
  // --help lists the daemon's own flags (both roles), not those of libraries.
  absl::SetFlagsUsageConfig(ringsync::HelpListingFlagsFrom("daemon/"));
  std::vector<char*> positional = absl::ParseCommandLine(argc, argv);
  if (positional.size() < 2) {
    std::fprintf(stderr, "%s\n\nTry 'ringsyncd --help'.\n", kUsage);
    return 2;
  }
  const std::string role = positional[1];
  if (positional.size() > 2) {
    std::fprintf(stderr, "ringsyncd: unexpected argument '%s'\n", positional[2]);
    return 2;
  }
  if (role == "coordinator") return ringsync::RunCoordinatorMain();
  if (role == "worker") return ringsync::RunWorkerMain();
  std::fprintf(stderr, "ringsyncd: unknown role '%s'; expected 'coordinator' or 'worker'\n",
               role.c_str());
  return 2;
}
