// What a data connection carries and how its ends fail: records arrive whole and in
// order; the reader tells a clean end from a cut or malformed one; the sender waits for
// room only within its limit, its cancellation and the receiver's liveness, and stays
// broken after a failure; connecting needs a listening receiver and an IP peer address.
#include "daemon/transport/tcp/data_connection.h"

#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "daemon/transport/tcp/data_listener.h"
#include "daemon/transport/tcp/incoming_records.h"
#include "daemon/transport/tcp/socket_address.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringsync {
namespace {

using ::testing::ElementsAre;

WaitLimit In(absl::Duration d) { return WaitLimit{SteadyDeadline(d)}; }
constexpr uint64_t kMaxRecordBytes = 4 << 20;

// Both ends of a data connection over loopback, as the sender and the ring's receiver
// (reading records up to `max_record_bytes`) get them.
struct Connection {
  UniqueFd sending;
  std::unique_ptr<IncomingRecords> receiving;
};

absl::StatusOr<Connection> Connect(uint64_t max_record_bytes = kMaxRecordBytes,
                                   std::unique_ptr<RecordOpener> opener = nullptr) {
  absl::Mutex mu;
  UniqueFd adopted;
  absl::StatusOr<std::unique_ptr<DataListener>> listener = DataListener::Listen({});
  if (!listener.ok()) return listener.status();
  absl::StatusOr<DataKey> key = (*listener)->Expect([&](UniqueFd fd) {
    absl::MutexLock lock(&mu);
    adopted = std::move(fd);
  });
  if (!key.ok()) return key.status();
  absl::StatusOr<sockaddr_storage> address = AddressOfGrpcPeer("ipv4:127.0.0.1:1", (*listener)->port());
  if (!address.ok()) return address.status();
  absl::StatusOr<UniqueFd> sending = ConnectDataConnection(*address, *key, In(absl::Seconds(10)));
  if (!sending.ok()) return sending.status();
  absl::MutexLock lock(&mu);
  auto in = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return adopted.valid(); };
  if (absl::Status s = AwaitWithLimit(mu, absl::Condition(&in), In(absl::Seconds(10)), "adoption");
      !s.ok()) {
    return s;
  }
  absl::StatusOr<std::unique_ptr<IncomingRecords>> receiving =
      IncomingRecords::Adopt(std::move(adopted), max_record_bytes, std::move(opener));
  if (!receiving.ok()) return receiving.status();
  return Connection{*std::move(sending), *std::move(receiving)};
}

// The next record, waiting for it as the ring's receiver does, at most 10 s (then
// DeadlineExceeded), so that a test that would hang fails instead.
absl::StatusOr<ReceivedRecord> ReadRecord(IncomingRecords& records) {
  const SteadyDeadline until(absl::Seconds(10));
  while (true) {
    absl::StatusOr<std::optional<ReceivedRecord>> next = records.TryRead();
    if (!next.ok()) return next.status();
    if (next->has_value()) return **std::move(next);
    if (until.Passed()) return absl::DeadlineExceededError("no whole record within 10 s");
    records.Wait(until.Left());
  }
}

absl::Span<const std::byte> Bytes(absl::string_view text) {
  return absl::MakeConstSpan(reinterpret_cast<const std::byte*>(text.data()), text.size());
}
std::string Text(const ReceivedRecord& record) {
  return std::string(reinterpret_cast<const char*>(record.bytes.get()), record.size);
}

// Writes `bytes` on `fd` as they are, bypassing RecordSender.
void WriteRaw(int fd, const std::string& bytes) {
  ASSERT_EQ(::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL), ssize_t(bytes.size()));
}
std::string LittleEndian32(uint32_t n) {
  return std::string{char(n), char(n >> 8), char(n >> 16), char(n >> 24)};
}

TEST(DataConnection, DeliversRecordsWholeAndInOrder) {
  absl::StatusOr<Connection> connection = Connect();
  ASSERT_TRUE(connection.ok()) << connection.status();
  std::string big((1 << 20) + 3, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 31 + 7);
  const absl::string_view b = big;

  std::vector<std::string> read;
  absl::Status end;
  std::jthread reader([&] {  // joined after `sender` is closed, below
    while (true) {
      absl::StatusOr<ReceivedRecord> record = ReadRecord(*connection->receiving);
      if (!record.ok()) {
        end = record.status();
        break;
      }
      read.push_back(Text(*record));
    }
  });
  RecordSender sender(std::move(connection->sending));
  const std::vector<std::vector<absl::Span<const std::byte>>> records = {
      {Bytes("x")},
      {Bytes("hello"), Bytes(""), Bytes(", "), Bytes("world")},
      {Bytes(b.substr(0, 1000)), Bytes(b.substr(1000, 1 << 19)), Bytes(b.substr(1000 + (1 << 19)))},
      {Bytes("last")}};
  for (const auto& pieces : records) {
    EXPECT_TRUE(sender.Send(pieces, In(absl::Seconds(10)), nullptr).ok());
  }
  sender.Close();
  reader.join();
  EXPECT_THAT(read, ElementsAre("x", "hello, world", big, "last"));
  EXPECT_EQ(end.code(), absl::StatusCode::kOutOfRange) << end;
}

// Both ends of a sealed connection: the receiver opens with the key the sender seals with.
struct Sealed {
  std::unique_ptr<RecordSender> sender;
  std::unique_ptr<IncomingRecords> receiving;
};
absl::StatusOr<Sealed> ConnectSealed(uint64_t max_record_bytes = kMaxRecordBytes) {
  absl::StatusOr<RecordSealKey> key = NewRecordSealKey();
  if (!key.ok()) return key.status();
  absl::StatusOr<std::unique_ptr<RecordOpener>> opener = RecordOpener::Create(*key);
  absl::StatusOr<std::unique_ptr<RecordSealer>> sealer = RecordSealer::Create(*key);
  if (!opener.ok() || !sealer.ok()) return absl::InternalError("no cipher");
  absl::StatusOr<Connection> connection = Connect(max_record_bytes, *std::move(opener));
  if (!connection.ok()) return connection.status();
  auto sender = std::make_unique<RecordSender>(std::move(connection->sending), *std::move(sealer));
  return Sealed{std::move(sender), std::move(connection->receiving)};
}

TEST(SealedDataConnection, DeliversRecordsWholeAndInOrderUpToTheLimit) {
  absl::StatusOr<Sealed> sealed = ConnectSealed(/*max_record_bytes=*/1 << 20);
  ASSERT_TRUE(sealed.ok()) << sealed.status();
  EXPECT_TRUE(sealed->sender->sealed());
  const std::string full(1 << 20, 'f');  // the limit is the plaintext's: the tag comes on top
  for (const std::string& record : {std::string("a frame head"), full, std::string("last")}) {
    ASSERT_TRUE(sealed->sender->Send({Bytes(record)}, In(absl::Seconds(10)), nullptr).ok());
    absl::StatusOr<ReceivedRecord> read = ReadRecord(*sealed->receiving);
    ASSERT_TRUE(read.ok()) << read.status();
    EXPECT_EQ(Text(*read), record);
  }
}

TEST(SealedDataConnection, ShowsTheWireNeitherThePayloadNorTheRecordsInTheClear) {
  absl::StatusOr<std::unique_ptr<RecordSealer>> sealer = RecordSealer::Create(RecordSealKey{});
  ASSERT_TRUE(sealer.ok());
  // What an eavesdropper reads: the connection without the key.
  absl::StatusOr<Connection> connection = Connect();
  ASSERT_TRUE(connection.ok()) << connection.status();
  RecordSender sender(std::move(connection->sending), *std::move(sealer));
  const std::string gradient(4096, 'g');
  ASSERT_TRUE(sender.Send({Bytes(gradient)}, In(absl::Seconds(10)), nullptr).ok());
  absl::StatusOr<ReceivedRecord> seen = ReadRecord(*connection->receiving);
  ASSERT_TRUE(seen.ok()) << seen.status();
  EXPECT_EQ(seen->size, gradient.size() + kRecordSealTagBytes);
  EXPECT_EQ(Text(*seen).find("gggggggg"), std::string::npos);
}

TEST(SealedDataConnection, SaysDataLossForARecordNotSealedWithItsKey) {
  // A record in the clear (a sender that does not seal), and one sealed under another key
  // (a stranger that learned the one-time data key but not the seal key).
  absl::StatusOr<RecordSealKey> key = NewRecordSealKey();
  absl::StatusOr<RecordSealKey> other = NewRecordSealKey();
  ASSERT_TRUE(key.ok() && other.ok());
  const std::string body(100, 'x');
  for (bool stranger_seals : {false, true}) {
    int fds[2];
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
    UniqueFd writing(fds[0]);
    absl::StatusOr<std::unique_ptr<IncomingRecords>> records =
        IncomingRecords::Adopt(UniqueFd(fds[1]), kMaxRecordBytes, *RecordOpener::Create(*key));
    ASSERT_TRUE(records.ok()) << records.status();
    RecordSender sender(std::move(writing),
                        stranger_seals ? *RecordSealer::Create(*other) : nullptr);
    ASSERT_TRUE(sender.Send({Bytes(body)}, In(absl::Seconds(10)), nullptr).ok());
    absl::StatusOr<ReceivedRecord> read = ReadRecord(**records);
    ASSERT_FALSE(read.ok()) << "stranger seals: " << stranger_seals;
    EXPECT_EQ(read.status().code(), absl::StatusCode::kDataLoss) << read.status();
  }
}

TEST(ReadRecord, SaysOutOfRangeWhenTheSenderClosesBetweenRecords) {
  absl::StatusOr<Connection> connection = Connect();
  ASSERT_TRUE(connection.ok()) << connection.status();
  RecordSender sender(std::move(connection->sending));
  ASSERT_TRUE(sender.Send({Bytes("only")}, In(absl::Seconds(10)), nullptr).ok());
  sender.Close();
  absl::StatusOr<ReceivedRecord> record = ReadRecord(*connection->receiving);
  ASSERT_TRUE(record.ok()) << record.status();
  EXPECT_EQ(Text(*record), "only");
  EXPECT_EQ(ReadRecord(*connection->receiving).status().code(),
            absl::StatusCode::kOutOfRange);
}

TEST(ReadRecord, SaysDataLossWhenTheConnectionEndsInsideARecord) {
  // Inside a record's payload (10 of 100 bytes), and inside its length (2 of 4 bytes).
  for (const std::string& cut : {LittleEndian32(100) + std::string(10, 'r'), std::string("\x64\x00", 2)}) {
    absl::StatusOr<Connection> connection = Connect();
    ASSERT_TRUE(connection.ok()) << connection.status();
    WriteRaw(connection->sending.get(), cut);
    connection->sending.Reset();
    EXPECT_EQ(ReadRecord(*connection->receiving).status().code(),
              absl::StatusCode::kDataLoss);
  }
}

TEST(ReadRecord, SaysDataLossForARecordOfNoBytesOrOverTheLimit) {
  for (uint32_t length : {uint32_t{0}, uint32_t{101}}) {
    absl::StatusOr<Connection> connection = Connect(/*max_record_bytes=*/100);
    ASSERT_TRUE(connection.ok()) << connection.status();
    WriteRaw(connection->sending.get(), LittleEndian32(length) + std::string(101, 'r'));
    EXPECT_EQ(ReadRecord(*connection->receiving).status().code(),
              absl::StatusCode::kDataLoss)
        << length;
  }
}

TEST(ReadRecord, ReadsARecordOfExactlyTheLimit) {
  absl::StatusOr<Connection> connection = Connect(/*max_record_bytes=*/100);
  ASSERT_TRUE(connection.ok()) << connection.status();
  WriteRaw(connection->sending.get(), LittleEndian32(100) + std::string(100, 'r'));
  absl::StatusOr<ReceivedRecord> record = ReadRecord(*connection->receiving);
  ASSERT_TRUE(record.ok()) << record.status();
  EXPECT_EQ(Text(*record), std::string(100, 'r'));
}

TEST(RecordSender, RefusesARecordOfNoBytes) {
  absl::StatusOr<Connection> connection = Connect();
  ASSERT_TRUE(connection.ok()) << connection.status();
  RecordSender sender(std::move(connection->sending));
  EXPECT_EQ(sender.Send({}, In(absl::Seconds(10)), nullptr).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(sender.Send({Bytes(""), Bytes("")}, In(absl::Seconds(10)), nullptr).code(),
            absl::StatusCode::kInvalidArgument);
}

// Sends 1 MiB records that nobody reads, each within `limit`, until one fails (the
// connection full) — at most 256 of them; its status.
absl::Status SendUntilFull(RecordSender& sender, const std::function<WaitLimit()>& limit,
                           const std::function<bool()>& gone) {
  const std::string mebibyte(1 << 20, 'f');
  for (int i = 0; i < 256; ++i) {
    if (absl::Status s = sender.Send({Bytes(mebibyte)}, limit(), gone); !s.ok()) return s;
  }
  return absl::OkStatus();
}

TEST(RecordSender, WaitsWhileTheReceiverDoesNotReadAndGivesUpAtItsLimit) {
  absl::StatusOr<Connection> connection = Connect();
  ASSERT_TRUE(connection.ok()) << connection.status();
  RecordSender sender(std::move(connection->sending));
  SteadyDeadline not_before;
  const absl::Status full = SendUntilFull(
      sender,
      [&] {
        not_before = SteadyDeadline(absl::Milliseconds(300));
        return WaitLimit{not_before};
      },
      nullptr);
  EXPECT_EQ(full.code(), absl::StatusCode::kDeadlineExceeded) << full;
  EXPECT_TRUE(not_before.Passed());  // it waited its limit out
  EXPECT_TRUE(sender.broken());
  EXPECT_EQ(sender.Send({Bytes("more")}, In(absl::Seconds(10)), nullptr).code(),
            absl::StatusCode::kUnavailable);
}

// Bytes the kernel holds in `fd`'s send queue that have not gone out yet.
int UnsentBytes(int fd) {
  int unsent = -1;
  EXPECT_EQ(::ioctl(fd, SIOCOUTQNSD, &unsent), 0) << std::strerror(errno);
  return unsent;
}

TEST(RecordSender, APacedRecordLeavesLittleUnsentAndWaitsForTheRest) {
  absl::StatusOr<Connection> connection = Connect();
  ASSERT_TRUE(connection.ok()) << connection.status();
  const UniqueFd watched(::dup(connection->sending.get()));
  RecordSender sender(std::move(connection->sending));
  const std::string record(8 << 20, 'p');  // more than the receiving end takes unread
  const absl::Status sent = sender.Send({Bytes(record)}, In(absl::Milliseconds(300)), nullptr,
                                        RecordPacing::kPaced);
  EXPECT_EQ(sent.code(), absl::StatusCode::kDeadlineExceeded) << sent;
  // The kernel may fill one more buffer of up to 64 KiB past the mark before it stops the
  // sender; unpaced, this record would leave megabytes.
  EXPECT_LE(UnsentBytes(watched.get()), kPacedUnsentBytes + (128 << 10));
}

TEST(RecordSender, AQueuedRecordAfterPacedOnesGoesWhileTheReceiverDoesNotRead) {
  // What a relay's or a stride link's frame needs after the ring's segments went paced.
  absl::StatusOr<Connection> connection = Connect();
  ASSERT_TRUE(connection.ok()) << connection.status();
  const UniqueFd watched(::dup(connection->sending.get()));
  RecordSender sender(std::move(connection->sending));
  const std::string segment(256 << 10, 's');
  constexpr int kSegments = 16;
  std::thread reader([&] {
    for (int i = 0; i < kSegments; ++i) {
      absl::StatusOr<ReceivedRecord> read = ReadRecord(*connection->receiving);
      ASSERT_TRUE(read.ok()) << read.status();
      EXPECT_EQ(read->size, segment.size());
    }
  });
  for (int i = 0; i < kSegments; ++i) {
    ASSERT_TRUE(sender.Send({Bytes(segment)}, In(absl::Seconds(10)), nullptr,
                            RecordPacing::kPaced).ok());
  }
  reader.join();
  // Now nobody reads: queued records fill the kernel's buffers, far past the paced mark,
  // before one has to wait.
  const std::string relay(1 << 20, 'r');
  ASSERT_TRUE(sender.Send({Bytes(relay)}, In(absl::Seconds(10)), nullptr).ok());
  absl::Status sent;
  for (int i = 0; i < 64 && sent.ok(); ++i) {
    sent = sender.Send({Bytes(relay)}, In(absl::Milliseconds(300)), nullptr);
  }
  EXPECT_EQ(sent.code(), absl::StatusCode::kDeadlineExceeded) << sent;
  EXPECT_GT(UnsentBytes(watched.get()), 2 * kPacedUnsentBytes);
}

TEST(RecordSender, GivesUpWaitingWhenCancelled) {
  absl::StatusOr<Connection> connection = Connect();
  ASSERT_TRUE(connection.ok()) << connection.status();
  RecordSender sender(std::move(connection->sending));
  Cancellation cancellation;
  cancellation.Cancel(absl::CancelledError("the collective was cancelled"));
  const absl::Status full = SendUntilFull(
      sender, [&] { return WaitLimit{SteadyDeadline(absl::Seconds(10)), &cancellation}; }, nullptr);
  EXPECT_EQ(full.code(), absl::StatusCode::kCancelled) << full;
  EXPECT_TRUE(sender.broken());
}

TEST(RecordSender, GivesUpWaitingAsSoonAsTheReceiverIsGone) {
  absl::StatusOr<Connection> connection = Connect();
  ASSERT_TRUE(connection.ok()) << connection.status();
  RecordSender sender(std::move(connection->sending));
  const absl::Status full =
      SendUntilFull(sender, [] { return In(absl::Seconds(10)); }, [] { return true; });
  EXPECT_EQ(full.code(), absl::StatusCode::kUnavailable) << full;
  EXPECT_TRUE(sender.broken());
}

TEST(RecordSender, FailsUnavailableOnceTheReceiverClosedTheConnection) {
  absl::StatusOr<Connection> connection = Connect();
  ASSERT_TRUE(connection.ok()) << connection.status();
  RecordSender sender(std::move(connection->sending));
  connection->receiving.reset();
  absl::Status sent;
  for (int i = 0; i < 100 && sent.ok(); ++i) {
    sent = sender.Send({Bytes("frame")}, In(absl::Seconds(10)), nullptr);
  }
  EXPECT_EQ(sent.code(), absl::StatusCode::kUnavailable) << sent;
  EXPECT_TRUE(sender.broken());
}

TEST(AddressOfGrpcPeer, ReadsAnIpPeerWithTheDataPortInsteadOfItsOwn) {
  absl::StatusOr<sockaddr_storage> v4 = AddressOfGrpcPeer("ipv4:127.0.0.1:7401", 9000);
  ASSERT_TRUE(v4.ok()) << v4.status();
  EXPECT_EQ(DescribeAddress(*v4), "127.0.0.1:9000");
  for (absl::string_view peer : {"ipv6:[::1]:7401", "ipv6:%5B::1%5D:7401"}) {
    absl::StatusOr<sockaddr_storage> v6 = AddressOfGrpcPeer(peer, 9000);
    ASSERT_TRUE(v6.ok()) << peer << ": " << v6.status();
    EXPECT_EQ(DescribeAddress(*v6), "[::1]:9000");
  }
}

TEST(DescribeHost, IsTheAddressWithoutItsPort) {
  EXPECT_EQ(DescribeHost(*AddressOfGrpcPeer("ipv4:198.18.0.3:50112", 0)), "198.18.0.3");
  EXPECT_EQ(DescribeHost(*AddressOfGrpcPeer("ipv6:%5B::1%5D:50112", 0)), "::1");
}

TEST(AddressOfGrpcPeer, RefusesAPeerThatIsNotAnIpAddress) {
  for (absl::string_view peer : {"unix:/tmp/x", "ipv4:nonsense:1", "ipv6:[::1", ""}) {
    EXPECT_EQ(AddressOfGrpcPeer(peer, 9000).status().code(), absl::StatusCode::kInvalidArgument) << peer;
  }
}

TEST(ConnectDataConnection, FailsUnavailableWhereNothingListens) {
  absl::StatusOr<UniqueFd> probe = ListenTcp("127.0.0.1", 0);
  ASSERT_TRUE(probe.ok()) << probe.status();
  const int port = *LocalPort(probe->get());
  probe->Reset();  // nothing listens there now
  absl::StatusOr<sockaddr_storage> address = AddressOfGrpcPeer("ipv4:127.0.0.1:1", port);
  ASSERT_TRUE(address.ok()) << address.status();
  EXPECT_EQ(ConnectDataConnection(*address, *NewDataKey(), In(absl::Seconds(10))).status().code(),
            absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace ringsync
