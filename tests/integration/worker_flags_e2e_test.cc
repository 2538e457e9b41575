// End to end, the worker's limits and transport flags: a value outside its documented range
// stops the worker at start (exit code 2) with a message naming the flag and its range.
// The algorithm flags and the timers have their own specs (algorithm_e2e_test,
// lease_e2e_test).
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "gmock/gmock.h"
#include "tests/integration/run_daemon.h"

namespace ringsync {
namespace {

using testing::RunDaemon;

TEST(WorkerFlags, AWorkerRefusesToStartWithALimitOrTransportFlagOutOfRangeNamingIt) {
  struct Case {
    const char* flag;
    const char* said;
  };
  for (const Case& c : {
           Case{"--segment_bytes=63", "--segment_bytes must be between 64 and 64 MiB"},
           Case{"--segment_bytes=67108865", "--segment_bytes must be between 64 and 64 MiB"},
           Case{"--max_inline_bytes=1023", "--max_inline_bytes must be between 1 KiB and 1 GiB"},
           Case{"--peer_transport=udp", "--peer_transport must be auto, tcp or grpc"},
           Case{"--peer_data_port=65536", "--peer_data_port must be between 0 and 65535"},
           Case{"--peer_data_port=-1", "--peer_data_port must be between 0 and 65535"},
           Case{"--peer_shm_slots=0", "--peer_shm_slots must be between 1 and 64"},
           Case{"--peer_shm_slots=65", "--peer_shm_slots must be between 1 and 64"},
           Case{"--shm_spin=-1ms", "--shm_spin must be between 0 and 10ms"},
           Case{"--shm_spin=11ms", "--shm_spin must be between 0 and 10ms"},
           Case{"--peer_shm_mailbox_bytes=12345", "--peer_shm_mailbox_bytes must be 0 or "},
           Case{"--max_registered_buffers=4097", "--max_registered_buffers must be between 0 and 4096"},
           Case{"--max_registered_buffer_bytes=1023", "--max_registered_buffer_bytes between 1 KiB"},
           Case{"--client_reattach_grace=-1s", "--client_reattach_grace must not be negative"},
           Case{"--collective_timeout=0s", "--collective_timeout must be positive"},
           Case{"--max_queued_jobs=0", "--max_queued_jobs must be at least 1"},
           Case{"--max_queued_bytes=-1", "--max_queued_bytes not negative"},
           Case{"--client_sequence_gap_timeout=0s", "--client_sequence_gap_timeout must be positive"},
       }) {
    const auto [exit_code, output] = RunDaemon("worker", {c.flag, "--coordinator=127.0.0.1:1"});
    EXPECT_EQ(exit_code, 2) << c.flag << ": " << output;
    EXPECT_THAT(output, ::testing::HasSubstr(c.said)) << c.flag << ": " << output;
  }
}

// gRPC would take port 99999 as 34463, and a host it cannot parse fails only when a
// connection is tried, after a minute of retries: every address is checked at start.
TEST(WorkerFlags, AWorkerRefusesToStartWithAnAddressThatIsNotHostPortNamingTheFlag) {
  struct Case {
    const char* flag;
    const char* said;
  };
  for (const Case& c : {
           Case{"--coordinator=127.0.0.1:99999", "--coordinator: '127.0.0.1:99999' is not "
                                                 "HOST:PORT: the port must be a number in 1..65535"},
           Case{"--coordinator=127.0.0.1:0", "the port must be a number in 1..65535"},
           Case{"--coordinator=127.0.0.1:abc", "the port must be a number in 1..65535"},
           Case{"--coordinator=[::1:80", "an IPv6 host must be in brackets"},
           Case{"--coordinator=:7500", "it has no host"},
           Case{"--peer_listen=127.0.0.1:99999", "--peer_listen: '127.0.0.1:99999' is not "
                                                 "HOST:PORT: the port must be a number in 0..65535"},
           Case{"--peer_listen=bad host:0", "the host is not a DNS name"},
           Case{"--http_listen=127.0.0.1:70000", "--http_listen: '127.0.0.1:70000' is not HOST:PORT"},
           Case{"--advertise_host=0.0.0.0", "--advertise_host=0.0.0.0 is a wildcard"},
           Case{"--advertise_host=w1:7500", "--advertise_host: 'w1:7500' is not a host"},
       }) {
    std::vector<std::string> flags = {c.flag};
    if (!absl::StartsWith(c.flag, "--coordinator=")) flags.push_back("--coordinator=127.0.0.1:1");
    const auto [exit_code, output] = RunDaemon("worker", flags);
    EXPECT_EQ(exit_code, 2) << c.flag << ": " << output;
    EXPECT_THAT(output, ::testing::HasSubstr(c.said)) << c.flag << ": " << output;
  }
}

TEST(WorkerFlags, ACoordinatorRefusesToListenOnAPortOutOfRange) {
  const auto [exit_code, output] =
      RunDaemon("coordinator", {"--world_size=1", "--listen=127.0.0.1:99999"});
  EXPECT_EQ(exit_code, 2) << output;
  EXPECT_THAT(output, ::testing::HasSubstr("--listen: '127.0.0.1:99999' is not HOST:PORT: the "
                                           "port must be a number in 0..65535"))
      << output;
}

}  // namespace
}  // namespace ringsync
