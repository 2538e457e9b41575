#include "daemon/transport/tcp/data_listener.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "daemon/transport/tcp/socket_address.h"

namespace ringsync {
namespace {

// How long the serving thread sleeps at most: expired keys and handshakes are looked at
// this often.
constexpr int kPollMillis = 200;

}  // namespace

absl::StatusOr<std::unique_ptr<DataListener>> DataListener::Listen(DataListenerOptions options) {
  if (options.port < 0 || options.port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("data port ", options.port, ": 0..65535 allowed"));
  }
  absl::StatusOr<UniqueFd> listening = ListenTcp(options.host, options.port);
  if (!listening.ok()) return listening.status();
  absl::StatusOr<int> port = LocalPort(listening->get());
  if (!port.ok()) return port.status();
  UniqueFd wake(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!wake.valid()) return absl::InternalError(absl::StrCat("eventfd: ", std::strerror(errno)));
  return std::unique_ptr<DataListener>(
      new DataListener(std::move(options), *std::move(listening), std::move(wake), *port));
}

DataListener::DataListener(DataListenerOptions options, UniqueFd listening, UniqueFd wake, int port)
    : options_(std::move(options)),
      listening_(std::move(listening)),
      wake_(std::move(wake)),
      port_(port),
      thread_([this] { Serve(); }) {}

DataListener::~DataListener() {
  const uint64_t one = 1;
  (void)!::write(wake_.get(), &one, sizeof(one));
  thread_.join();
}

absl::StatusOr<DataKey> DataListener::Expect(Adopt adopt) {
  absl::StatusOr<DataKey> key = NewDataKey();
  if (!key.ok()) return key.status();
  std::vector<Adopt> expired;  // destroyed after the lock is released
  absl::MutexLock lock(&mu_);
  DropExpiredKeys(expired);
  if (expected_.size() >= options_.max_keys) {
    return absl::ResourceExhaustedError(absl::StrCat(
        options_.max_keys, " data connection keys are out; this stream's frames stay on gRPC"));
  }
  expected_.emplace(*key, Expected{std::move(adopt), SteadyDeadline(options_.key_lifetime)});
  return *key;
}

void DataListener::Revoke(const DataKey& key) {
  Adopt dropped;  // destroyed outside the lock: it may own what its stream owned
  absl::MutexLock lock(&mu_);
  auto it = expected_.find(key);
  if (it == expected_.end()) return;
  dropped = std::move(it->second.adopt);
  expected_.erase(it);
}

size_t DataListener::keys_out() {
  std::vector<Adopt> expired;  // destroyed after the lock is released
  absl::MutexLock lock(&mu_);
  DropExpiredKeys(expired);
  return expected_.size();
}

void DataListener::DropExpiredKeys(std::vector<Adopt>& dropped) {
  for (auto it = expected_.begin(); it != expected_.end();) {
    if (!it->second.expires.Passed()) {
      ++it;
      continue;
    }
    dropped.push_back(std::move(it->second.adopt));
    it = expected_.erase(it);
  }
}

void DataListener::Serve() {
  std::vector<Handshake> handshakes;
  std::vector<pollfd> polled;
  while (true) {
    polled.clear();
    polled.push_back({wake_.get(), POLLIN, 0});
    polled.push_back({listening_.get(), POLLIN, 0});
    for (const Handshake& h : handshakes) polled.push_back({h.fd.get(), POLLIN, 0});
    const int ready = ::poll(polled.data(), polled.size(), kPollMillis);
    if (ready < 0 && errno != EINTR) return;
    if (polled[0].revents != 0) return;  // stopping
    // Handshakes first (their slots in `polled` line up with `handshakes` only until the
    // accepted ones are appended).
    for (size_t i = 0; i < handshakes.size(); ++i) {
      Handshake& h = handshakes[i];
      bool over = false;
      if (polled[i + 2].revents != 0) {
        over = Advance(h);
      } else if (h.deadline.Passed()) {
        Refuse("data_connection_handshake_timeout",
               absl::StrCat("data connection from ", h.peer, " sent ", h.got, " of ",
                            kDataHandshakeBytes, " handshake bytes in time"));
        over = true;
      }
      if (over) h.fd.Reset();
    }
    std::erase_if(handshakes, [](const Handshake& h) { return !h.fd.valid(); });
    if (polled[1].revents != 0) AcceptAll(handshakes);
    std::vector<Adopt> expired;  // destroyed after the lock is released
    absl::MutexLock lock(&mu_);
    DropExpiredKeys(expired);
  }
}

void DataListener::AcceptAll(std::vector<Handshake>& handshakes) {
  while (true) {
    sockaddr_storage from{};
    socklen_t from_bytes = sizeof(from);
    UniqueFd fd(::accept4(listening_.get(), reinterpret_cast<sockaddr*>(&from), &from_bytes,
                          SOCK_NONBLOCK | SOCK_CLOEXEC));
    if (!fd.valid()) return;  // EAGAIN: none left; anything else: the next poll tells
    const std::string peer = DescribeAddress(from);
    if (handshakes.size() >= options_.max_handshakes) {
      Refuse("data_connection_too_many_handshakes",
             absl::StrCat("data connection from ", peer, ": ", options_.max_handshakes,
                          " handshakes already in progress"));
      continue;
    }
    handshakes.push_back(Handshake{std::move(fd), SteadyDeadline(options_.handshake_timeout), {}, 0, peer});
  }
}

bool DataListener::Advance(Handshake& h) {
  const ssize_t got = ::recv(h.fd.get(), h.bytes.data() + h.got, h.bytes.size() - h.got, 0);
  if (got < 0 && (errno == EAGAIN || errno == EINTR)) return false;
  if (got <= 0) return true;  // it went away (or reset): nothing to report, nothing adopted
  h.got += static_cast<size_t>(got);
  if (h.got < h.bytes.size()) return false;
  if (std::memcmp(h.bytes.data(), kDataHandshakeMagic.data(), kDataHandshakeMagic.size()) != 0) {
    Refuse("data_connection_not_a_handshake",
           absl::StrCat("data connection from ", h.peer, " did not open with the handshake"));
    return true;
  }
  DataKey key;
  std::memcpy(key.data(), h.bytes.data() + kDataHandshakeMagic.size(), key.size());
  Adopt adopt;
  std::vector<Adopt> expired;  // destroyed after the lock is released
  {
    absl::MutexLock lock(&mu_);
    DropExpiredKeys(expired);
    auto it = expected_.find(key);
    if (it != expected_.end()) {
      adopt = std::move(it->second.adopt);
      expected_.erase(it);
    }
  }
  if (!adopt) {
    Refuse("data_connection_unknown_key",
           absl::StrCat("data connection from ", h.peer,
                        " presented a key this worker did not hand out, or one already used"));
    return true;
  }
  // Blocking from here: its reader sleeps in recv.
  const int flags = ::fcntl(h.fd.get(), F_GETFL);
  if (flags < 0 || ::fcntl(h.fd.get(), F_SETFL, flags & ~O_NONBLOCK) < 0) return true;
  const int on = 1;
  ::setsockopt(h.fd.get(), IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on));
  // One byte into an empty send buffer: cannot block.
  if (::send(h.fd.get(), &kDataAccepted, 1, MSG_NOSIGNAL) != 1) return true;
  adopt(std::move(h.fd));
  return true;
}

void DataListener::Refuse(absl::string_view reason, const std::string& detail) {
  if (options_.refusals) options_.refusals(reason, detail);
}

}  // namespace ringsync
