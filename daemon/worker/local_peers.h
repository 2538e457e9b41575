// LocalPeers: who is at the other end of each connection on the worker's unix socket.
//
// gRPC does not show a handler the connection's file descriptor, so the worker accepts
// unix-socket connections itself (UnixSocketListener), reads each peer's SO_PEERCRED
// there, and hands the descriptor to gRPC. A connection handed over that way is named
// "fd:<N>" in ServerContext::peer(); this table maps that name back to the peer's
// credentials. A connection that is not in it came in over TCP (--client_listen).
//
// A descriptor number is reused once gRPC has closed its connection; Add for the new
// connection replaces the old entry, so a lookup always names the connection that owns
// the number now (client_gate.h says why requests are not authorised by this alone).
//
// Thread-safety: all methods are safe from any thread.
#pragma once

#include <sys/types.h>

#include <optional>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace ringsync {

// The kernel's word on a unix-socket peer, as it was when the peer connected. pid is 0
// when the peer lives in a pid namespace this worker cannot see (another container).
struct PeerCredentials {
  pid_t pid = 0;
  uid_t uid = 0;
  gid_t gid = 0;
};

// SO_PEERCRED of a connected unix socket.
absl::StatusOr<PeerCredentials> PeerCredentialsOf(int fd);

class LocalPeers {
 public:
  void Add(int fd, const PeerCredentials& peer);
  // The credentials of the unix-socket connection gRPC names `grpc_peer`; nullopt for
  // any other connection (TCP).
  std::optional<PeerCredentials> Find(absl::string_view grpc_peer) const;

 private:
  mutable absl::Mutex mu_;
  absl::flat_hash_map<int, PeerCredentials> by_fd_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ringsync
