// DataListener: the TCP port on which a worker accepts the data connections of the ring
// streams it accepted (data_key.h). A connection is anonymous until its first bytes
// present a key this worker handed out over an authenticated stream (Expect); it is then
// handed to whoever asked for that key, and the key is forgotten. Anything else — a wrong
// or reused key, a connection that says nothing within the handshake timeout, one beyond
// the bound on handshakes in progress — is closed unanswered and reported as a refusal.
//
// Bounds: at most `max_handshakes` connections between accept and key, each for at most
// `handshake_timeout`; at most `max_keys` keys out, each good for `key_lifetime`.
//
// One thread serves the port: it accepts, reads handshakes (non-blocking, so one slow
// caller delays nobody) and runs the hand-over (`Adopt`) itself.
//
// Thread-safety: all methods are safe from any thread.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/sync/steady_deadline.h"
#include "daemon/transport/tcp/data_key.h"
#include "daemon/process/unique_fd.h"
#include "wire/security/token_check.h"

namespace ringsync {

struct DataListenerOptions {
  std::string host = "127.0.0.1";  // address (or name) to listen on; "0.0.0.0": every IPv4 one
  int port = 0;                    // 0: one the kernel chooses
  absl::Duration handshake_timeout = absl::Seconds(5);
  size_t max_handshakes = 64;
  size_t max_keys = 4096;
  absl::Duration key_lifetime = absl::Seconds(30);
  RefusalReporter refusals;  // null: refusals go unreported
};

class DataListener {
 public:
  // Receives an accepted connection (blocking mode, the handshake answered).
  using Adopt = absl::AnyInvocable<void(UniqueFd)>;

  static absl::StatusOr<std::unique_ptr<DataListener>> Listen(DataListenerOptions options);
  // Stops the thread; keys out are forgotten, connections mid-handshake closed.
  ~DataListener();
  DataListener(const DataListener&) = delete;
  DataListener& operator=(const DataListener&) = delete;

  int port() const { return port_; }

  // A new key: the first connection that presents it within key_lifetime goes to
  // `adopt`, on the listener's thread (so `adopt` must not block). ResourceExhausted
  // when max_keys are out.
  absl::StatusOr<DataKey> Expect(Adopt adopt);
  // Forgets `key` (its stream ended before the connection came): nothing is adopted for it.
  void Revoke(const DataKey& key);
  // Keys out (handed out, not used, not revoked, not expired).
  size_t keys_out();

 private:
  struct Handshake {
    UniqueFd fd;
    SteadyDeadline deadline;
    std::array<std::byte, kDataHandshakeBytes> bytes{};
    size_t got = 0;
    std::string peer;  // "198.18.0.3:40112", for refusals
  };
  struct Expected {
    Adopt adopt;
    SteadyDeadline expires;
  };

  DataListener(DataListenerOptions options, UniqueFd listening, UniqueFd wake, int port);
  void Serve();
  void AcceptAll(std::vector<Handshake>& handshakes);
  // Reads what `handshake` sent; true once it is over (adopted or refused).
  bool Advance(Handshake& handshake);
  void Refuse(absl::string_view reason, const std::string& detail);
  // Moves the expired keys' Adopts to `dropped`, for the caller to destroy after
  // releasing mu_ (as Revoke does: an Adopt may own what its stream owned).
  void DropExpiredKeys(std::vector<Adopt>& dropped) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const DataListenerOptions options_;
  const UniqueFd listening_;
  const UniqueFd wake_;  // an eventfd: written to stop Serve
  const int port_;
  absl::Mutex mu_;
  std::map<DataKey, Expected> expected_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace ringsync
