// IncomingRecords, the reading end for a thread that reads only when it wants a record:
// TryRead never blocks, hands out a record only once it is whole (however the bytes came),
// keeps the part it has for the next call, and tells a clean end from a cut or malformed
// one; Wait ends when bytes come, or on Wake.
#include "daemon/transport/tcp/incoming_records.h"

#include <sys/socket.h>

#include <string>
#include <thread>

#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringsync {
namespace {

constexpr uint64_t kMaxRecordBytes = 1 << 20;

struct Pair {
  UniqueFd sending;
  std::unique_ptr<IncomingRecords> records;
};

Pair Connected() {
  int fds[2];
  EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  absl::StatusOr<std::unique_ptr<IncomingRecords>> records =
      IncomingRecords::Adopt(UniqueFd(fds[1]), kMaxRecordBytes);
  EXPECT_TRUE(records.ok()) << records.status();
  return Pair{UniqueFd(fds[0]), records.ok() ? *std::move(records) : nullptr};
}

void Write(const UniqueFd& fd, const std::string& bytes) {
  ASSERT_EQ(::send(fd.get(), bytes.data(), bytes.size(), MSG_NOSIGNAL), ssize_t(bytes.size()));
}
std::string Record(const std::string& body) {
  const auto n = static_cast<uint32_t>(body.size());
  return std::string{char(n), char(n >> 8), char(n >> 16), char(n >> 24)} + body;
}
std::string Text(const ReceivedRecord& record) {
  return std::string(reinterpret_cast<const char*>(record.bytes.get()), record.size);
}

TEST(IncomingRecords, HandsOutARecordOnlyOnceItIsWholeHoweverItsBytesCame) {
  Pair pair = Connected();
  const std::string record = Record("a record in three parts");
  for (const std::string& part : {record.substr(0, 2), record.substr(2, 9), record.substr(11)}) {
    absl::StatusOr<std::optional<ReceivedRecord>> before = pair.records->TryRead();
    ASSERT_TRUE(before.ok()) << before.status();
    EXPECT_FALSE(before->has_value()) << "nothing whole yet";
    Write(pair.sending, part);
  }
  absl::StatusOr<std::optional<ReceivedRecord>> whole = pair.records->TryRead();
  ASSERT_TRUE(whole.ok() && whole->has_value()) << whole.status();
  EXPECT_EQ(Text(**whole), "a record in three parts");
}

TEST(IncomingRecords, HandsOutRecordsThatCameTogetherOneByOneInOrder) {
  Pair pair = Connected();
  Write(pair.sending, Record("one") + Record("two") + Record(std::string(70000, 'x')));
  for (const std::string& expected : {std::string("one"), std::string("two"), std::string(70000, 'x')}) {
    absl::StatusOr<std::optional<ReceivedRecord>> next = pair.records->TryRead();
    ASSERT_TRUE(next.ok() && next->has_value()) << next.status();
    EXPECT_EQ(Text(**next), expected);
  }
  absl::StatusOr<std::optional<ReceivedRecord>> none = pair.records->TryRead();
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
}

TEST(IncomingRecords, TellsACleanEndFromACutOrMalformedOne) {
  struct Case {
    std::string sent;
    absl::StatusCode code;
  };
  for (const Case& c : {Case{Record("last"), absl::StatusCode::kOutOfRange},
                        Case{Record("cut short").substr(0, 7), absl::StatusCode::kDataLoss},
                        Case{std::string("\x05\x00", 2), absl::StatusCode::kDataLoss},
                        Case{Record(""), absl::StatusCode::kDataLoss},
                        Case{std::string("\x01\x00\x10\x00", 4), absl::StatusCode::kDataLoss}}) {
    Pair pair = Connected();
    Write(pair.sending, c.sent);
    pair.sending.Reset();
    absl::Status end;
    for (int i = 0; i < 3 && end.ok(); ++i) {  // a whole record first, where one was sent
      end = pair.records->TryRead().status();
    }
    EXPECT_EQ(end.code(), c.code) << end;
  }
}

TEST(IncomingRecords, AWaitEndsWhenBytesComeOrOnWake) {
  Pair pair = Connected();
  absl::Notification woke;
  std::thread waiter([&] {
    pair.records->Wait(absl::Seconds(30));
    woke.Notify();
  });
  Write(pair.sending, Record("wake up"));
  EXPECT_TRUE(woke.WaitForNotificationWithTimeout(absl::Seconds(10))) << "bytes did not end the wait";
  waiter.join();
  ASSERT_TRUE(pair.records->TryRead().ok());

  absl::Notification woken;
  std::thread sleeper([&] {
    pair.records->Wait(absl::Seconds(30));
    woken.Notify();
  });
  pair.records->Wake();
  EXPECT_TRUE(woken.WaitForNotificationWithTimeout(absl::Seconds(10))) << "Wake did not end the wait";
  sleeper.join();
}

}  // namespace
}  // namespace ringsync
