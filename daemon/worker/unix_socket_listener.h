// UnixSocketListener: the worker's unix socket, accepted by the worker itself rather
// than by gRPC, so that it learns each connection's peer (SO_PEERCRED, LocalPeers)
// before it hands the connection to the gRPC server (grpc::AddInsecureChannelFromFd).
//
// Thread-safety: Serve and Stop from one thread; the accept loop runs on its own.
#pragma once

#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "daemon/worker/local_peers.h"
#include "grpcpp/server.h"

namespace ringsync {

class UnixSocketListener {
 public:
  // Binds and listens on `path`, which PrepareSocketPath has made ready. Connections
  // wait in the backlog until Serve.
  static absl::StatusOr<std::unique_ptr<UnixSocketListener>> Listen(const std::string& path);

  ~UnixSocketListener();  // Stop()
  UnixSocketListener(const UnixSocketListener&) = delete;
  UnixSocketListener& operator=(const UnixSocketListener&) = delete;

  // Accepts connections until Stop: records each peer in `peers`, then gives the
  // connection to `server`. REQUIRES: `server` is started; both outlive Stop().
  void Serve(grpc::Server& server, LocalPeers& peers);
  // Stops accepting and closes the listening socket (the path stays: the caller owns it).
  void Stop();

 private:
  UnixSocketListener(int listen_fd, int wake_fd) : listen_fd_(listen_fd), wake_fd_(wake_fd) {}
  void AcceptLoop(grpc::Server& server, LocalPeers& peers);

  int listen_fd_;
  int wake_fd_;  // an eventfd that ends the accept loop
  std::thread thread_;
};

}  // namespace ringsync
