// For tests: N ranks in one process, each with its own Peer server on 127.0.0.1, whose
// ring links are connected exactly as the worker connects them — one generation at a
// time, as many generations as a test likes.
#pragma once

#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/ring/ring_member.h"
#include "core/testing/spawn_ranks.h"
#include "daemon/transport/grpc/grpc_link.h"
#include "daemon/transport/grpc/testing/peer_test_server.h"
#include "gtest/gtest.h"

namespace ringsync::testing {

// How the ranks' links carry frames: gRPC messages only, the same-host path (payload
// in a slot ring, frames through its mailbox, the stream for the hello and liveness), or
// data connections (frames on TCP beside the stream), in the clear or sealed.
struct TestTransport {
  bool same_host = false;
  uint64_t slot_bytes = 64 << 10;
  uint64_t mailbox_bytes = 64 << 10;  // 0: slots only, frames on the stream
  bool data = false;
  // Where the receivers' data ports listen (the streams reach 127.0.0.1): another address
  // makes every data connection fail, as a firewalled port would.
  const char* data_host = "127.0.0.1";
  // Receivers hand out seal keys, as under mutual TLS: every record then travels sealed,
  // and one the sender did not seal fails the link.
  bool sealed = false;
  const char* name = "Grpc";
};

inline const TestTransport kGrpcOnly{};
inline const TestTransport kSameHost{.same_host = true, .name = "SameHost"};
inline const TestTransport kTcpData{.data = true, .name = "TcpData"};
inline const TestTransport kTcpSealed{.data = true, .sealed = true, .name = "TcpSealed"};

// For a test suite whose cases run over every transport:
//   class MyRing : public EveryTransport {};
//   INSTANTIATE_TEST_SUITE_P(Transports, MyRing, kEveryTransport, TransportName);
class EveryTransport : public ::testing::TestWithParam<TestTransport> {
 protected:
  TestTransport transport() const { return GetParam(); }
};
inline const auto kEveryTransport = ::testing::Values(kGrpcOnly, kSameHost, kTcpData, kTcpSealed);
inline std::string TransportName(const ::testing::TestParamInfo<TestTransport>& info) {
  return info.param.name;
}

class GrpcTestRing {
 public:
  explicit GrpcTestRing(int n, TestTransport transport = kGrpcOnly)
      : n_(n), transport_(transport) {
    for (int r = 0; r < n; ++r) {
      servers_.push_back(
          std::make_unique<PeerTestServer>(transport.same_host, transport.data, transport.data_host,
                                           transport.sealed));
    }
    links_.resize(static_cast<size_t>(n));
  }

  // Retires every older generation on every rank (as a new ring view does), then connects
  // each rank's link of `generation` concurrently. Returns each rank's status.
  std::vector<absl::Status> Connect(uint64_t generation,
                                    absl::Duration timeout = absl::Seconds(10)) {
    generation_ = generation;
    for (auto& server : servers_) {
      server->registry.RetireBefore(generation, absl::AbortedError("a newer generation began"));
    }
    return SpawnRanks(n_, [&](int r) -> absl::Status {
      links_[static_cast<size_t>(r)].reset();
      const int prev = (r + n_ - 1) % n_;
      absl::StatusOr<std::shared_ptr<PeerInbox>> inbox =
          servers_[static_cast<size_t>(r)]->registry.Expect(
              generation, ExpectedSender{prev, absl::StrCat("w", prev)});
      if (!inbox.ok()) return inbox.status();
      absl::StatusOr<std::unique_ptr<GrpcLink>> link =
          ConnectRingLink(member(r), neighbours(r), *inbox, {SteadyDeadline(timeout)});
      if (!link.ok()) return link.status();
      links_[static_cast<size_t>(r)] = *std::move(link);
      return absl::OkStatus();
    });
  }

  // Rank r's neighbours as Connect gives them: rank r+1's server, this ring's transport.
  RingNeighbours neighbours(int r) const {
    const int next = (r + 1) % n_;
    RingNeighbours neighbours;
    neighbours.next_target = servers_[static_cast<size_t>(next)]->address;
    neighbours.next_description = absl::StrCat("rank ", next);
    neighbours.worker_id = absl::StrCat("w", r);
    neighbours.offer_shm = transport_.same_host;
    neighbours.shm_slots = 4;
    neighbours.shm_slot_bytes = transport_.slot_bytes;
    neighbours.shm_mailbox_bytes = transport_.mailbox_bytes;
    neighbours.offer_data = transport_.data;
    return neighbours;
  }

  int size() const { return n_; }
  RingMember member(int r) const { return RingMember{r, n_, generation_}; }
  GrpcLink& link(int r) { return *links_[static_cast<size_t>(r)]; }
  PeerTestServer& server(int r) { return *servers_[static_cast<size_t>(r)]; }
  void DropLink(int r) { links_[static_cast<size_t>(r)].reset(); }

 private:
  const int n_;
  const TestTransport transport_;
  uint64_t generation_ = 0;
  std::vector<std::unique_ptr<PeerTestServer>> servers_;
  std::vector<std::unique_ptr<GrpcLink>> links_;
};

}  // namespace ringsync::testing
