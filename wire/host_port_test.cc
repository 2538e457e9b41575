#include "wire/host_port.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringsync {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

TEST(ParseHostPort, ReadsDnsNamesIpv4AndBracketedIpv6) {
  struct Case {
    const char* address;
    const char* host;
    int port;
  };
  for (const Case& c : {Case{"127.0.0.1:7500", "127.0.0.1", 7500}, Case{"10.0.0.5:1", "10.0.0.5", 1},
                        Case{"localhost:65535", "localhost", 65535},
                        Case{"worker-3.cluster.local:7500", "worker-3.cluster.local", 7500},
                        Case{"ringsync_worker_1:7500", "ringsync_worker_1", 7500},
                        Case{"[::1]:7500", "::1", 7500}, Case{"[fd00::5]:80", "fd00::5", 80}}) {
    absl::StatusOr<HostPort> parsed = ParseHostPort(c.address, PortUse::kConnect);
    ASSERT_TRUE(parsed.ok()) << c.address << ": " << parsed.status();
    EXPECT_EQ(parsed->host, c.host);
    EXPECT_EQ(parsed->port, c.port);
    EXPECT_EQ(parsed->ToString(), c.address) << "brackets come back around an IPv6 host";
  }
}

TEST(ParseHostPort, RefusesMalformedAddressesSayingWhichPartIsWrong) {
  struct Case {
    std::string address;
    const char* why;
  };
  for (const Case& c : {Case{"", "empty"}, Case{"127.0.0.1", "no port"},
                        Case{"127.0.0.1:", "port"}, Case{"127.0.0.1:65536", "1..65535"},
                        Case{"127.0.0.1:99999", "1..65535"}, Case{"127.0.0.1:+80", "port"},
                        Case{"127.0.0.1:80x", "port"}, Case{"127.0.0.1:abc", "port"},
                        Case{":7500", "no host"}, Case{"999.1.1.1:80", "IPv4"},
                        Case{"1.2.3:80", "IPv4"}, Case{"::1:80", "brackets"},
                        Case{"[::1:80", "brackets"}, Case{"[zz::1]:80", "IPv6"},
                        Case{"[]:80", "no host"}, Case{"-host:80", "DNS name"},
                        Case{"host-:80", "DNS name"}, Case{"a..b:80", "DNS name"},
                        Case{"ho st:80", "DNS name"}, Case{"unix:/tmp/x", "port"},
                        Case{std::string(64, 'a') + ".b:80", "DNS name"},
                        Case{std::string(300, 'a') + ":80", "longer than 260"}}) {
    absl::StatusOr<HostPort> parsed = ParseHostPort(c.address, PortUse::kConnect);
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument) << c.address;
    EXPECT_THAT(parsed.status().message(), AllOf(HasSubstr("HOST:PORT"), HasSubstr(c.why)))
        << c.address;
  }
}

TEST(ParseHostPort, PortZeroMeansAnyFreePortOnlyWhereTheAddressIsListenedOn) {
  EXPECT_EQ(ParseHostPort("127.0.0.1:0", PortUse::kListen)->port, 0);
  EXPECT_EQ(ParseHostPort("[::]:0", PortUse::kListen)->host, "::");
  EXPECT_THAT(ParseHostPort("127.0.0.1:0", PortUse::kConnect).status().message(),
              HasSubstr("1..65535"));
  EXPECT_THAT(ParseHostPort("127.0.0.1:70000", PortUse::kListen).status().message(),
              HasSubstr("0..65535 (0: any free port)"));
}

TEST(ParseHostPort, QuotesWhatItRefusesEscapedAndShortened) {
  const std::string message(
      ParseHostPort("bad\nhost:80", PortUse::kConnect).status().message());
  EXPECT_THAT(message, HasSubstr("'bad\\nhost:80'"));
  EXPECT_EQ(message.find('\n'), std::string::npos);
  EXPECT_THAT(ParseHostPort(std::string(200, 'a'), PortUse::kConnect).status().message(),
              HasSubstr(std::string(96, 'a') + "...'"));
}

TEST(ParseHost, ReadsAHostAloneAnIpv6AddressWithOrWithoutBrackets) {
  EXPECT_EQ(*ParseHost("worker-3.example"), "worker-3.example");
  EXPECT_EQ(*ParseHost("10.0.0.5"), "10.0.0.5");
  EXPECT_EQ(*ParseHost("fd00::5"), "fd00::5");
  EXPECT_EQ(*ParseHost("[fd00::5]"), "fd00::5");
  for (const char* bad : {"", "10.0.0.256", "fd00::zz", "[w3]", "w 3", "w3:7500x"}) {
    absl::StatusOr<std::string> parsed = ParseHost(bad);
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(parsed.status().message(), HasSubstr("is not a host")) << bad;
  }
}

TEST(HostPort, AnAddressIsAnIpv4OrIpv6LiteralNotANameToResolve) {
  for (const char* address : {"10.0.0.5:1", "[fd00::5]:1", "0.0.0.0:1"}) {
    EXPECT_TRUE(ParseHostPort(address, PortUse::kConnect)->is_address()) << address;
  }
  for (const char* name : {"w1:1", "worker-3.example:1", "localhost:1"}) {
    EXPECT_FALSE(ParseHostPort(name, PortUse::kConnect)->is_address()) << name;
  }
}

TEST(HostPort, WildcardsAreTheAnyAddressesOfBothFamilies) {
  for (const char* wildcard : {"0.0.0.0:1", "[::]:1", "[0:0::0]:1"}) {
    EXPECT_TRUE(ParseHostPort(wildcard, PortUse::kConnect)->is_wildcard()) << wildcard;
  }
  for (const char* address : {"127.0.0.1:1", "[::1]:1", "zero:1"}) {
    EXPECT_FALSE(ParseHostPort(address, PortUse::kConnect)->is_wildcard()) << address;
  }
}

}  // namespace
}  // namespace ringsync
