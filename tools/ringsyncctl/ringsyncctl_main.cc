// ringsyncctl: the operator's view of a ringsync cluster.
//
//   ringsyncctl status [--coordinator=HOST:PORT] [--json]   the ring as a table
//   ringsyncctl health TARGET [--service=NAME] [--json]     grpc.health.v1 check
//
// Exit codes: 0 = answered (status) / SERVING (health); 1 = unreachable or not
// serving, with one line saying why; 2 = bad usage.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "daemon/logging/json_string.h"
#include "daemon/process/help_filter.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "ringsync/v1/coordinator.grpc.pb.h"
#include "tools/ringsyncctl/cluster_report.h"
#include "tools/ringsyncctl/health_check.h"
#include "wire/security/transport_security.h"
#include "wire/grpc_options.h"

ABSL_FLAG(std::string, coordinator, "127.0.0.1:7400",
          "status: the coordinator's gRPC address, HOST:PORT (also accepted as the argument "
          "after 'status').");
ABSL_FLAG(std::string, target, "",
          "health: the gRPC target to check, HOST:PORT or unix:/path (also accepted as the "
          "argument after 'health'): a coordinator's --listen, a worker's --socket or "
          "--client_listen.");
ABSL_FLAG(std::string, service, "",
          "health: the service name to ask about; empty = the whole server.");
ABSL_FLAG(bool, json, false, "Print one JSON object instead of text.");
ABSL_FLAG(absl::Duration, timeout, absl::Seconds(5), "Deadline of the call.");
ABSL_FLAG(std::string, tls_ca, "",
          "PEM CA that signed the daemons' certificates: with --tls_cert and --tls_key, talk "
          "mutual TLS (the daemons' --tls_* flags).");
ABSL_FLAG(std::string, tls_cert, "", "PEM client certificate from that CA (make-certs.sh client/NAME).");
ABSL_FLAG(std::string, tls_key, "", "PEM private key of --tls_cert.");
ABSL_FLAG(std::string, token_file, "", "file holding the cluster token (the daemons' --token_file).");

namespace ringsync {
namespace {

constexpr char kUsage[] =
    "the operator's view of a ringsync cluster.\n"
    "  ringsyncctl status [--coordinator=HOST:PORT] [--json]\n"
    "      the ring as the coordinator sees it: one row per worker (rank, id, address,\n"
    "      ready, heartbeat age, generation, collectives done/failed, last error)\n"
    "  ringsyncctl health TARGET [--service=NAME] [--json]\n"
    "      grpc.health.v1.Health/Check on TARGET (HOST:PORT or unix:/path); exit 0 if\n"
    "      SERVING, 1 otherwise, saying why\n"
    "Exit codes: 0 ok, 1 unreachable / not serving, 2 bad usage.";

// What to present to the daemons (the flags above); exits with a message when unusable.
TransportSecurity SecurityFromFlags() {
  TransportSecurityOptions options;
  options.tls_ca = absl::GetFlag(FLAGS_tls_ca);
  options.tls_cert = absl::GetFlag(FLAGS_tls_cert);
  options.tls_key = absl::GetFlag(FLAGS_tls_key);
  options.token_file = absl::GetFlag(FLAGS_token_file);
  absl::StatusOr<TransportSecurity> security = TransportSecurity::Create(options);
  if (!security.ok()) {
    std::fprintf(stderr, "ringsyncctl: %s\n", std::string(security.status().message()).c_str());
    std::exit(2);
  }
  return *std::move(security);
}

int Usage(const std::string& why) {
  std::fprintf(stderr, "ringsyncctl: %s\n\n%s\n", why.c_str(), kUsage);
  return 2;
}

// The positional argument after the command, else the flag, as a gRPC target.
absl::StatusOr<std::string> PickTarget(const std::vector<std::string>& args,
                                       const std::string& flag) {
  if (args.size() > 3) return absl::InvalidArgumentError("more than one given");
  const std::string& given = args.size() == 3 ? args[2] : flag;
  if (given.empty()) return absl::InvalidArgumentError("no address given");
  return NormalizeTarget(given, PortUse::kConnect);
}

int Status(const std::vector<std::string>& args) {
  absl::StatusOr<std::string> picked = PickTarget(args, absl::GetFlag(FLAGS_coordinator));
  if (!picked.ok()) {
    return Usage(absl::StrCat("status takes one coordinator address, ringsyncctl status "
                              "[HOST:PORT]: ", picked.status().message()));
  }
  const std::string& coordinator = *picked;
  const absl::Duration timeout = absl::GetFlag(FLAGS_timeout);
  auto stub = v1::Coordinator::NewStub(
      SecurityFromFlags().CreateChannel(coordinator, grpc::ChannelArguments()));
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  v1::ClusterStatus status;
  const grpc::Status rpc = stub->GetClusterStatus(&context, v1::GetClusterStatusRequest(), &status);
  if (!rpc.ok()) {
    const std::string why = absl::StrCat("cannot get the cluster status from coordinator ",
                                         coordinator, " within ", absl::FormatDuration(timeout),
                                         ": ", rpc.error_message(),
                                         "; is `ringsyncd coordinator --listen=", coordinator,
                                         "` running?");
    if (absl::GetFlag(FLAGS_json)) {
      std::printf("{\"coordinator\":%s,\"error\":%s}\n", JsonString(coordinator).c_str(),
                  JsonString(why).c_str());
    } else {
      std::fprintf(stderr, "ringsyncctl: %s\n", why.c_str());
    }
    return 1;
  }
  const std::string text = absl::GetFlag(FLAGS_json) ? FormatClusterJson(coordinator, status)
                                                     : FormatClusterTable(coordinator, status);
  std::fputs(text.c_str(), stdout);
  return 0;
}

int Health(const std::vector<std::string>& args) {
  absl::StatusOr<std::string> picked = PickTarget(args, absl::GetFlag(FLAGS_target));
  if (!picked.ok()) {
    return Usage(absl::StrCat("health takes one target, ringsyncctl health HOST:PORT (or "
                              "unix:/path): ", picked.status().message()));
  }
  const std::string& target = *picked;
  const std::string service = absl::GetFlag(FLAGS_service);
  const HealthResult result =
      CheckHealth(target, service, SecurityFromFlags(), absl::GetFlag(FLAGS_timeout));
  if (absl::GetFlag(FLAGS_json)) {
    std::fputs(HealthJson(target, service, result).c_str(), stdout);
  } else if (result.serving) {
    std::printf("%s: SERVING\n", target.c_str());
  } else {
    std::printf("%s: %s: %s\n", target.c_str(), result.status.c_str(), result.detail.c_str());
  }
  return result.serving ? 0 : 1;
}

}  // namespace
}  // namespace ringsync

int main(int argc, char** argv) {
  ringsync::UseSystemResolverUnlessConfigured();
  absl::SetProgramUsageMessage(ringsync::kUsage);
  absl::SetFlagsUsageConfig(ringsync::HelpListingFlagsFrom("ringsyncctl"));
  std::vector<char*> positional = absl::ParseCommandLine(argc, argv);
  const std::vector<std::string> args(positional.begin(), positional.end());
  if (args.size() < 2) return ringsync::Usage("no command given");
  if (args[1] == "status") return ringsync::Status(args);
  if (args[1] == "health") return ringsync::Health(args);
  return ringsync::Usage(absl::StrCat("unknown command '", args[1], "'"));
}
