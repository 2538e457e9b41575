// For tests: one rank's serving side, a gRPC server with the Peer service on
// 127.0.0.1 (port chosen by the kernel), and the inbox registry it fills.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "wire/grpc_options.h"
#include "daemon/metrics/refusals.h"
#include "daemon/transport/grpc/peer_service.h"
#include "prometheus/registry.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"

namespace ringsync::testing {

struct PeerTestServer {
  prometheus::Registry metrics;
  metrics::Refusals refusals{metrics};
  RefusalReporter report_refusal = [this](absl::string_view reason, absl::string_view detail) {
    refusals.Refuse(reason, detail);
  };
  InboxRegistry registry{4, report_refusal};
  const bool accept_shm = false;  // map a same-host sender's slot ring (and its mailbox)
  // Asks senders that offer it for a data connection when set.
  const std::shared_ptr<DataListener> data_listener;
  const bool seal_data = false;  // hand out seal keys with the data keys
  PeerService service{registry, HelloPolicy{.refusals = report_refusal,
                                            .accept_shm = accept_shm,
                                            .data_listener = data_listener,
                                            .seal_data_connections = seal_data,
                                            .max_data_record_bytes = (1 << 20) + kPeerMessageOverheadBytes}};
  std::unique_ptr<grpc::Server> server;
  std::string address;  // host:port peers dial

  explicit PeerTestServer(bool accept_same_host = false, bool accept_data = false,
                          const std::string& data_host = "127.0.0.1", bool seal = false)
      : accept_shm(accept_same_host),
        data_listener(accept_data ? ListenForData(data_host, report_refusal) : nullptr),
        seal_data(seal) {
    grpc::ServerBuilder builder;
    ConfigureServerBuilder(builder, (1 << 20) + kPeerMessageOverheadBytes);
    ListeningPort port;
    port.Add(builder, "127.0.0.1:0");
    builder.RegisterService(&service);
    server = builder.BuildAndStart();
    address = *port.BoundAddress();
  }
  ~PeerTestServer() { Stop(); }
  PeerTestServer(const PeerTestServer&) = delete;
  PeerTestServer& operator=(const PeerTestServer&) = delete;

  static std::shared_ptr<DataListener> ListenForData(const std::string& host,
                                                    RefusalReporter refusals) {
    absl::StatusOr<std::unique_ptr<DataListener>> listener =
        DataListener::Listen({.host = host, .refusals = std::move(refusals)});
    EXPECT_TRUE(listener.ok()) << listener.status();
    return listener.ok() ? *std::move(listener) : nullptr;
  }

  void Stop() {
    if (server == nullptr) return;
    registry.CloseAll(absl::UnavailableError("server stopping"));
    server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
    server.reset();
  }
};

}  // namespace ringsync::testing
