// What DataListener lets through its port: a connection is handed to whoever asked for
// the key it presents — once, while the key is out — and anything else (a used, unknown,
// revoked or expired key, no handshake, silence, one handshake too many) is closed
// unanswered and reported, without delaying anybody else.
#include "daemon/transport/tcp/data_listener.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>

#include <atomic>
#include <functional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "daemon/transport/tcp/data_connection.h"
#include "daemon/transport/tcp/socket_address.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringsync {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

WaitLimit In(absl::Duration d) { return WaitLimit{SteadyDeadline(d)}; }

// A DataListener on 127.0.0.1 (its options the defaults as `tune` leaves them), with the
// refusals it reported and the connections it handed to Taker()s.
class Port {
 public:
  explicit Port(const std::function<void(DataListenerOptions&)>& tune = nullptr) {
    DataListenerOptions options;
    options.refusals = [this](absl::string_view reason, absl::string_view) {
      absl::MutexLock lock(&mu_);
      refusals_.emplace_back(reason);
    };
    if (tune) tune(options);
    absl::StatusOr<std::unique_ptr<DataListener>> listener = DataListener::Listen(std::move(options));
    EXPECT_TRUE(listener.ok()) << listener.status();
    if (listener.ok()) listener_ = *std::move(listener);
  }
  bool ok() const { return listener_ != nullptr; }
  DataListener* operator->() const { return listener_.get(); }
  DataListener* get() const { return listener_.get(); }

  // Keeps what it is handed, noting on which thread.
  DataListener::Adopt Taker() {
    return [this](UniqueFd fd) {
      absl::MutexLock lock(&mu_);
      adopted_.push_back(std::move(fd));
      adopters_.push_back(std::this_thread::get_id());
    };
  }
  // The next connection handed to a Taker, within 10 s; an invalid fd if none.
  UniqueFd NextAdopted() {
    absl::MutexLock lock(&mu_);
    auto handed = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return adopted_.size() > taken_; };
    if (!AwaitWithLimit(mu_, absl::Condition(&handed), In(absl::Seconds(10)), "adoption").ok()) {
      return UniqueFd();
    }
    return std::move(adopted_[taken_++]);
  }
  std::vector<std::thread::id> adopters() {
    absl::MutexLock lock(&mu_);
    return adopters_;
  }
  std::vector<std::string> refusals() {
    absl::MutexLock lock(&mu_);
    return refusals_;
  }

  sockaddr_storage address() const { return *AddressOfGrpcPeer("ipv4:127.0.0.1:1", listener_->port()); }
  // A data connection that presents `key`, once accepted.
  absl::StatusOr<UniqueFd> Present(const DataKey& key) const {
    return ConnectDataConnection(address(), key, In(absl::Seconds(10)));
  }

 private:
  absl::Mutex mu_;
  std::vector<std::string> refusals_ ABSL_GUARDED_BY(mu_);
  std::vector<UniqueFd> adopted_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread::id> adopters_ ABSL_GUARDED_BY(mu_);
  size_t taken_ ABSL_GUARDED_BY(mu_) = 0;
  std::unique_ptr<DataListener> listener_;  // last: stopped before what it reports to
};

// A plain TCP connection to the listener that has said nothing yet.
UniqueFd RawConnection(const Port& port) {
  absl::StatusOr<UniqueFd> fd = ConnectTcp(port.address(), In(absl::Seconds(10)));
  EXPECT_TRUE(fd.ok()) << fd.status();
  return fd.ok() ? *std::move(fd) : UniqueFd();
}

// Whether the other end of `fd` has closed it (end of stream, or reset) within `within`
// (looked at once when that is zero).
bool ClosedByListener(int fd, absl::Duration within = absl::Seconds(10)) {
  for (const SteadyDeadline until(within);;) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 10) > 0) {
      char byte;
      const ssize_t got = ::recv(fd, &byte, 1, MSG_DONTWAIT);
      return got == 0 || (got < 0 && errno != EAGAIN && errno != EINTR);
    }
    if (until.Passed()) return false;
  }
}

// Whether `done` holds within `within`.
bool Within(absl::Duration within, const std::function<bool()>& done) {
  for (const SteadyDeadline until(within); !done();) {
    if (until.Passed()) return false;
    absl::SleepFor(absl::Milliseconds(1));
  }
  return true;
}

TEST(DataListener, HandsAConnectionThatPresentsItsKeyToWhoeverAskedForIt) {
  Port port;
  ASSERT_TRUE(port.ok());
  EXPECT_GT(port->port(), 0);
  absl::StatusOr<DataKey> key = port->Expect(port.Taker());
  ASSERT_TRUE(key.ok()) << key.status();
  EXPECT_EQ(port->keys_out(), 1u);

  absl::StatusOr<UniqueFd> sending = port.Present(*key);
  ASSERT_TRUE(sending.ok()) << sending.status();
  const UniqueFd receiving = port.NextAdopted();
  ASSERT_TRUE(receiving.valid());
  EXPECT_EQ(port->keys_out(), 0u);
  EXPECT_NE(port.adopters().at(0), std::this_thread::get_id());  // on the listener's thread
  EXPECT_EQ(::fcntl(receiving.get(), F_GETFL) & O_NONBLOCK, 0);     // blocking mode

  const std::string said = "the first frame";
  ASSERT_EQ(::send(sending->get(), said.data(), said.size(), MSG_NOSIGNAL), ssize_t(said.size()));
  const timeval ten_seconds{10, 0};
  ::setsockopt(receiving.get(), SOL_SOCKET, SO_RCVTIMEO, &ten_seconds, sizeof(ten_seconds));
  std::string heard(said.size(), '\0');
  EXPECT_EQ(::recv(receiving.get(), heard.data(), heard.size(), MSG_WAITALL), ssize_t(said.size()));
  EXPECT_EQ(heard, said);
  EXPECT_THAT(port.refusals(), IsEmpty());
}

TEST(DataListener, RefusesAKeyAlreadyUsedAndOneNeverHandedOut) {
  Port port;
  ASSERT_TRUE(port.ok());
  absl::StatusOr<DataKey> key = port->Expect(port.Taker());
  ASSERT_TRUE(key.ok()) << key.status();
  ASSERT_TRUE(port.Present(*key).ok());

  EXPECT_EQ(port.Present(*key).status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(port.Present(*NewDataKey()).status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(port.refusals(),
              ElementsAre("data_connection_unknown_key", "data_connection_unknown_key"));
  EXPECT_EQ(port.adopters().size(), 1u);
}

TEST(DataListener, RefusesARevokedKeyAndNeverAdoptsForIt) {
  Port port;
  ASSERT_TRUE(port.ok());
  auto owned = std::make_shared<int>(0);  // what the stream behind the key owns
  absl::StatusOr<DataKey> key =
      port->Expect([owned, taker = port.Taker()](UniqueFd fd) mutable { taker(std::move(fd)); });
  ASSERT_TRUE(key.ok()) << key.status();
  port->Revoke(*key);
  EXPECT_EQ(port->keys_out(), 0u);
  EXPECT_EQ(owned.use_count(), 1);  // the Adopt is gone

  EXPECT_EQ(port.Present(*key).status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(port.refusals(), ElementsAre("data_connection_unknown_key"));
  EXPECT_THAT(port.adopters(), IsEmpty());
}

TEST(DataListener, ClosesAConnectionThatDoesNotOpenWithTheHandshake) {
  Port port;
  ASSERT_TRUE(port.ok());
  const UniqueFd raw = RawConnection(port);
  const std::string garbage = "GET / HTTP/1.1\r\nHost: ringsync\r\n";  // more than enough
  ASSERT_EQ(::send(raw.get(), garbage.data(), kDataHandshakeBytes, 0), ssize_t(kDataHandshakeBytes));
  EXPECT_TRUE(ClosedByListener(raw.get()));
  EXPECT_THAT(port.refusals(), ElementsAre("data_connection_not_a_handshake"));
}

TEST(DataListener, ClosesAConnectionThatSaysNothingWithinTheHandshakeTimeout) {
  Port port([](auto& o) { o.handshake_timeout = absl::Milliseconds(300); });
  ASSERT_TRUE(port.ok());
  const SteadyDeadline not_before(absl::Milliseconds(300));
  const UniqueFd silent = RawConnection(port);
  EXPECT_TRUE(ClosedByListener(silent.get()));
  EXPECT_TRUE(not_before.Passed());
  EXPECT_THAT(port.refusals(), ElementsAre("data_connection_handshake_timeout"));
}

TEST(DataListener, OneSlowCallerDelaysNobody) {
  Port port([](auto& o) { o.handshake_timeout = absl::Seconds(60); });
  ASSERT_TRUE(port.ok());
  const UniqueFd silent = RawConnection(port);
  const UniqueFd halfway = RawConnection(port);  // the magic, and then nothing
  ASSERT_EQ(::send(halfway.get(), kDataHandshakeMagic.data(), kDataHandshakeMagic.size(), 0),
            ssize_t(kDataHandshakeMagic.size()));
  absl::StatusOr<DataKey> key = port->Expect(port.Taker());
  ASSERT_TRUE(key.ok()) << key.status();

  EXPECT_TRUE(port.Present(*key).ok());
  EXPECT_TRUE(port.NextAdopted().valid());
  EXPECT_FALSE(ClosedByListener(silent.get(), absl::ZeroDuration()));
  EXPECT_FALSE(ClosedByListener(halfway.get(), absl::ZeroDuration()));
  EXPECT_THAT(port.refusals(), IsEmpty());
}

TEST(DataListener, ClosesAtOnceConnectionsBeyondMaxHandshakes) {
  Port port([](auto& o) {
    o.handshake_timeout = absl::Seconds(60);
    o.max_handshakes = 2;
  });
  ASSERT_TRUE(port.ok());
  const UniqueFd first = RawConnection(port);
  const UniqueFd second = RawConnection(port);
  const UniqueFd third = RawConnection(port);

  EXPECT_TRUE(ClosedByListener(third.get()));
  EXPECT_THAT(port.refusals(), ElementsAre("data_connection_too_many_handshakes"));
  EXPECT_FALSE(ClosedByListener(first.get(), absl::ZeroDuration()));
  EXPECT_FALSE(ClosedByListener(second.get(), absl::ZeroDuration()));
}

TEST(DataListener, HandsOutAtMostMaxKeys) {
  Port port([](auto& o) { o.max_keys = 2; });
  ASSERT_TRUE(port.ok());
  auto nobody = [](UniqueFd) {};
  absl::StatusOr<DataKey> one = port->Expect(nobody);
  ASSERT_TRUE(one.ok()) << one.status();
  ASSERT_TRUE(port->Expect(nobody).ok());
  EXPECT_EQ(port->Expect(nobody).status().code(), absl::StatusCode::kResourceExhausted);
  port->Revoke(*one);
  EXPECT_TRUE(port->Expect(nobody).ok());
}

// A stream that ends revokes its key, and an Adopt owns what its stream owns: dropping an
// Adopt may revoke a key. Here it revokes from another thread, so that a listener that
// dropped it under its own lock fails this test (in 5 s) rather than deadlocking.
struct StreamEnd {
  StreamEnd(DataListener* listener, const DataKey& key) : listener(listener), key(key) {}
  DataListener* listener;
  DataKey key;
  std::jthread revoker;
  std::atomic<bool> revoked{false}, revoked_in_time{false}, over{false};
};
struct StreamState {
  StreamEnd* end;
  ~StreamState() {
    end->revoker = std::jthread([end = end] {
      end->listener->Revoke(end->key);
      end->revoked = true;
    });
    end->revoked_in_time = Within(absl::Seconds(5), [this] { return end->revoked.load(); });
    end->over = true;
  }
};

TEST(DataListener, ForgetsAKeyAfterItsLifetimeAndDropsItsAdoptOutsideItsLock) {
  Port port([](auto& o) { o.key_lifetime = absl::Milliseconds(200); });
  ASSERT_TRUE(port.ok());
  absl::StatusOr<DataKey> other = port->Expect([](UniqueFd) {});
  ASSERT_TRUE(other.ok()) << other.status();
  StreamEnd end(port.get(), *other);  // its revoker joined before `port` stops
  absl::StatusOr<DataKey> key = port->Expect([state = std::make_shared<StreamState>(&end)](UniqueFd) {});
  ASSERT_TRUE(key.ok()) << key.status();

  EXPECT_TRUE(Within(absl::Seconds(10), [&] { return end.over.load(); }));
  EXPECT_TRUE(end.revoked_in_time.load());
  EXPECT_EQ(port->keys_out(), 0u);
  EXPECT_EQ(port.Present(*key).status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(port.refusals(), ElementsAre("data_connection_unknown_key"));
}

TEST(DataListener, RefusesToListenOnAPortOutOfRange) {
  for (int port : {-1, 65536}) {
    DataListenerOptions options;
    options.port = port;
    EXPECT_EQ(DataListener::Listen(options).status().code(), absl::StatusCode::kInvalidArgument) << port;
  }
}

}  // namespace
}  // namespace ringsync
