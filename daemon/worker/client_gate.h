// ClientGate: which training process is attached to this worker, and the check every
// request passes before the worker maps, unlinks or queues anything on its behalf.
//
// How a request is tied to the attached client: Attach opens the gate and returns a
// fresh 256-bit secret, the attach token, on the attached client's own stream (its first
// WorkerEvent); every later request must carry it as metadata (kAttachTokenMetadata),
// compared in constant time. Why a token rather than SO_PEERCRED alone: gRPC names a
// connection only by its descriptor number ("fd:N", see LocalPeers), which the kernel
// reuses once a connection closes, so a request could be credited to the wrong peer
// for a moment; and a request over --client_listen (TCP) has no SO_PEERCRED at all. The
// token ties each request to the attachment itself, over either transport. The peer's
// credentials (SO_PEERCRED, read by the worker's own accept) still say who is attached:
// its real pid, whose ringsync-<pid>- files the worker removes when it leaves, and its
// uid, which must own every shared file it names.
//
// TCP identity: until transport authentication (mTLS or a cluster token on
// --client_listen) says who the peer is, the token is all a TCP client has; that
// identity belongs in AttachedClient beside `local`.
//
// Thread-safety: all methods are safe from any thread.
#pragma once

#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "daemon/worker/local_peers.h"

namespace ringsync {

struct AttachedClient {
  std::string token;
  // The peer on the unix socket; nullopt when it attached over TCP (then the worker
  // refuses its shared-memory tensors: it cannot tell whose files they are).
  std::optional<PeerCredentials> local;
};

class ClientGate {
 public:
  // Attaches a client (the caller made sure none is); returns its token, or why the
  // kernel gave no random bytes for one (nothing is attached then).
  absl::StatusOr<std::string> Open(std::optional<PeerCredentials> local);
  // Detaches the client holding `token`; a stale token changes nothing.
  void Close(absl::string_view token);
  // The attached client, when `presented` is its token; PermissionDenied otherwise.
  absl::StatusOr<AttachedClient> Check(absl::string_view presented) const;

 private:
  mutable absl::Mutex mu_;
  std::optional<AttachedClient> attached_ ABSL_GUARDED_BY(mu_);
};

// Whether `a` equals `b`, in time that depends on their lengths only.
bool SameSecret(absl::string_view a, absl::string_view b);

}  // namespace ringsync
