// Specification of what the coordinator accepts in a worker's fields.
#include "daemon/coordinator/request_validation.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringsync {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

TEST(ValidateWorkerId, AcceptsShortNamesOfLettersDigitsDotsDashesUnderscores) {
  for (const char* id : {"w0", "W", "7", "worker-12", "host.rack_3", "a.b-c_d"}) {
    EXPECT_TRUE(ValidateWorkerId(id).ok()) << id;
  }
  EXPECT_TRUE(ValidateWorkerId(std::string(64, 'x')).ok());
}

TEST(ValidateWorkerId, RefusesEmptyLongOrOddNamesSayingWhatIsAllowed) {
  for (const std::string& id :
       {std::string(""), std::string(65, 'x'), std::string("-w0"), std::string(".w0"),
        std::string("w 0"), std::string("w/0"), std::string("../etc"), std::string("w0\n"),
        std::string("w\xC3\xA9")}) {
    const absl::Status status = ValidateWorkerId(id);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << id;
    EXPECT_THAT(status.message(), AllOf(HasSubstr("worker_id"), HasSubstr("[A-Za-z0-9._-]")));
  }
  EXPECT_THAT(ValidateWorkerId("").message(), HasSubstr("worker_id empty is invalid"));
}

TEST(ValidateHostPort, AcceptsDnsNamesIpv4AndBracketedIpv6) {
  for (const char* address : {"127.0.0.1:7500", "10.0.0.5:1", "localhost:65535",
                              "worker-3.cluster.local:7500", "[::1]:7500", "[fd00::5]:80",
                              "ringsync_worker_1:7500"}) {
    EXPECT_TRUE(ValidateHostPort("peer_address", address, /*reachable=*/true).ok()) << address;
  }
}

TEST(ValidateHostPort, RefusesMalformedAddressesNamingTheFieldAndTheShape) {
  for (const char* address :
       {"", "127.0.0.1", "127.0.0.1:", ":7500", "127.0.0.1:0", "127.0.0.1:65536",
        "127.0.0.1:+80", "127.0.0.1:80x", "999.1.1.1:80", "1.2.3:80", "::1:80", "[::1:80",
        "[zz::1]:80", "[]:80", "-host:80", "host-:80", "a..b:80", "ho st:80", "unix:/tmp/x"}) {
    const absl::Status status = ValidateHostPort("peer_address", address, /*reachable=*/true);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << address;
    EXPECT_THAT(status.message(), AllOf(HasSubstr("peer_address"), HasSubstr("HOST:PORT")))
        << address;
  }
  EXPECT_FALSE(ValidateHostPort("peer_address", std::string(300, 'a') + ":80", true).ok());
}

TEST(ValidateHostPort, WildcardHostsAreRefusedWhereOthersMustConnect) {
  for (const char* address : {"0.0.0.0:7500", "[::]:7500"}) {
    const absl::Status status = ValidateHostPort("peer_address", address, /*reachable=*/true);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << address;
    EXPECT_THAT(status.message(), HasSubstr("wildcard"));
    EXPECT_TRUE(ValidateHostPort("http_address", address, /*reachable=*/false).ok()) << address;
  }
}

}  // namespace
}  // namespace ringsync
