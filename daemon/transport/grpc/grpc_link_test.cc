// The gRPC link keeps the Link contract (core/link/testing/link_conformance.h): rank 0
// sends to rank 1 over a real RingStream on 127.0.0.1, its frames as gRPC messages or on a
// data connection beside it.
#include <memory>

#include "core/link/testing/link_conformance.h"
#include "daemon/transport/grpc/grpc_link.h"
#include "daemon/transport/grpc/testing/grpc_test_ring.h"

namespace ringsync {
namespace {

using ::ringsync::testing::LinkConformance;

class GrpcPair final : public testing::LinkPair {
 public:
  explicit GrpcPair(testing::TestTransport transport) : ring_(2, transport) {
    for (const absl::Status& s : ring_.Connect(1)) EXPECT_TRUE(s.ok()) << s;
  }
  Link& sender() override { return ring_.link(0); }
  Link& receiver() override { return ring_.link(1); }

 private:
  testing::GrpcTestRing ring_;
};

std::unique_ptr<testing::LinkPair> MakeGrpcPair() {
  return std::make_unique<GrpcPair>(testing::kGrpcOnly);
}
// Frames on a data connection beside the stream.
std::unique_ptr<testing::LinkPair> MakeTcpDataPair() {
  return std::make_unique<GrpcPair>(testing::kTcpData);
}
// ... sealed, as under mutual TLS.
std::unique_ptr<testing::LinkPair> MakeTcpSealedPair() {
  return std::make_unique<GrpcPair>(testing::kTcpSealed);
}

TEST(FallbackTarget, IsTheObservedAddressAtTheAdvertisedPort) {
  // With the scheme that keeps gRPC's DNS resolver out of it.
  EXPECT_EQ(FallbackTarget("w1:7401", "198.18.0.3"), "ipv4:198.18.0.3:7401");
  EXPECT_EQ(FallbackTarget("w1.example:7401", "fd00::3"), "ipv6:[fd00::3]:7401");
}

TEST(FallbackTarget, IsNoneWithoutANameToResolveOrAnAddressToFallBackTo) {
  EXPECT_EQ(FallbackTarget("127.0.0.1:7401", "127.0.0.1"), "");  // an address already
  EXPECT_EQ(FallbackTarget("[::1]:7401", "::1"), "");
  EXPECT_EQ(FallbackTarget("w1:7401", ""), "");  // not joined over IP, or an old coordinator
  EXPECT_EQ(FallbackTarget("w1", "198.18.0.3"), "");  // no port
  EXPECT_EQ(FallbackTarget("[w1]:7401", "198.18.0.3"), "");  // a name in brackets
}

INSTANTIATE_TEST_SUITE_P(Grpc, LinkConformance, ::testing::Values(&MakeGrpcPair));
INSTANTIATE_TEST_SUITE_P(TcpData, LinkConformance, ::testing::Values(&MakeTcpDataPair));
INSTANTIATE_TEST_SUITE_P(TcpSealed, LinkConformance, ::testing::Values(&MakeTcpSealedPair));

}  // namespace
}  // namespace ringsync
