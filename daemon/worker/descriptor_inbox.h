// DescriptorInbox: a unix socket beside the worker's (DescriptorSocketPath) where the
// training process hands over the memfd of a buffer it registers (SCM_RIGHTS), under a
// nonce it then names in RegisterBuffer.
//
// Why: the worker used to open the buffer as /proc/<client pid>/fd/<n>, which needs the
// client's pid, and a client in another pid namespace (a trainer in its own container, as
// deploy/docker-compose.yml runs them) has none the worker can see: its tensors went
// through shared-memory files, copied four times, and its call channel was refused. A
// descriptor passed over a unix socket needs only the socket, which the client reaches
// anyway.
//
// Protocol: one SOCK_SEQPACKET connection per descriptor. The client sends one message:
// a 16-byte nonce of its choosing, with exactly one descriptor attached. The inbox answers
// one byte, 'Y' (held) or 'N' (refused: not one descriptor, not 16 bytes, too many held),
// and closes. The descriptor waits under its nonce until RegisterBuffer takes it (once),
// at most `hold_for`; RegisterBuffer, authenticated by the attach token, does every check
// on it (sealed_mapping.h). The inbox itself trusts nothing: at most `max_held` wait, a
// connection that says nothing within `handover_timeout` is closed, and every descriptor
// received beyond the one is closed at once. Up to 16 connections are served at once, each
// with its own deadline, so one silent client delays no other (more wait in the backlog). Each
// refusal is reported (ringsync_refused_total): descriptor_handover_malformed (not one
// descriptor with a 16-byte nonce), descriptor_handover_full (max_held wait, or the nonce
// waits already), descriptor_handover_timeout (silent).
//
// Thread-safety: Take is thread-safe; the accept loop runs on its own thread until
// destruction, which also removes the socket file.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/sync/steady_deadline.h"
#include "daemon/process/unique_fd.h"
#include "wire/descriptor_socket.h"
#include "wire/security/token_check.h"

namespace ringsync {

struct DescriptorInboxLimits {
  size_t max_held = 64;
  absl::Duration hold_for = absl::Seconds(10);
  absl::Duration handover_timeout = absl::Seconds(1);
};

class DescriptorInbox {
 public:
  // Binds and listens on `path` (PrepareSocketPath has made it ready) and starts serving.
  // `refused` (may be empty) hears every refusal.
  static absl::StatusOr<std::unique_ptr<DescriptorInbox>> Listen(const std::string& path,
                                                                 DescriptorInboxLimits limits,
                                                                 RefusalReporter refused = {});
  ~DescriptorInbox();
  DescriptorInbox(const DescriptorInbox&) = delete;
  DescriptorInbox& operator=(const DescriptorInbox&) = delete;

  // The descriptor handed over under `nonce`, taken out; NotFound when there is none (never
  // handed over, taken already, or held longer than hold_for).
  absl::StatusOr<UniqueFd> Take(absl::string_view nonce);

  const std::string& path() const { return path_; }

 private:
  struct Held {
    UniqueFd fd;
    SteadyDeadline until;
  };
  DescriptorInbox(std::string path, DescriptorInboxLimits limits, RefusalReporter refused,
                  UniqueFd listen, UniqueFd wake);
  void Refuse(absl::string_view reason, absl::string_view detail) const;
  void AcceptLoop();
  // Reads one handover from `connection` (readable, or closed by the client) and answers it.
  void Receive(const UniqueFd& connection);
  void DropExpiredLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string path_;
  const DescriptorInboxLimits limits_;
  const RefusalReporter refused_;
  const UniqueFd listen_;
  const UniqueFd wake_;  // an eventfd that ends the accept loop
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, Held> held_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace ringsync
