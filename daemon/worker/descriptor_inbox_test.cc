// Specification of the worker's descriptor socket (descriptor_inbox.h), against the SDK's
// side of it (client/src/descriptor_handover.h) and against raw messages no SDK sends.
#include "daemon/worker/descriptor_inbox.h"

#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "client/src/descriptor_handover.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "wire/unix_socket_address.h"

namespace ringsync {
namespace {

using internal::HandOverDescriptor;
using ::testing::HasSubstr;

constexpr absl::Duration kHandOver = absl::Seconds(5);

// The same file: what a descriptor taken from the inbox must be.
bool SameFile(int a, int b) {
  struct stat sa {}, sb {};
  return ::fstat(a, &sa) == 0 && ::fstat(b, &sb) == 0 && sa.st_dev == sb.st_dev &&
         sa.st_ino == sb.st_ino;
}

class DescriptorInboxTest : public ::testing::Test {
 protected:
  void Start(DescriptorInboxLimits limits = {}) {
    dir_ = std::filesystem::temp_directory_path() /
           ("inbox-test-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name()).substr(0, 40);
    std::filesystem::create_directories(dir_);
    path_ = DescriptorSocketPath((dir_ / "w.sock").string());
    absl::StatusOr<std::unique_ptr<DescriptorInbox>> inbox = DescriptorInbox::Listen(
        path_, limits, [this](absl::string_view reason, absl::string_view) {
          absl::MutexLock lock(&mu_);
          refusals_.emplace_back(reason);
        });
    ASSERT_TRUE(inbox.ok()) << inbox.status();
    inbox_ = *std::move(inbox);
  }
  void TearDown() override {
    inbox_.reset();
    std::filesystem::remove_all(dir_);
  }

  // A memfd, as the SDK makes a registered buffer.
  static UniqueFd Memfd() { return UniqueFd(::memfd_create("inbox-test", MFD_CLOEXEC)); }

  // A connection to the inbox (invalid when it could not connect).
  UniqueFd Connect() {
    UniqueFd connection(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
    const sockaddr_un address = UnixSocketAddress(path_).value();
    if (::connect(connection.get(), reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0) {
      return UniqueFd();
    }
    return connection;
  }

  // Sends `nonce` with `fds` attached as one message; the inbox's answer ('\0': none).
  char SendRaw(const std::string& nonce, const std::vector<int>& fds) {
    const UniqueFd connection = Connect();
    if (!connection.valid()) return '\0';
    std::string data = nonce;
    iovec io{data.data(), data.size()};
    std::vector<char> control(CMSG_SPACE(sizeof(int) * std::max<size_t>(fds.size(), 1)));
    msghdr message{};
    message.msg_iov = &io;
    message.msg_iovlen = 1;
    if (!fds.empty()) {
      message.msg_control = control.data();
      message.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
      cmsghdr* c = CMSG_FIRSTHDR(&message);
      c->cmsg_level = SOL_SOCKET;
      c->cmsg_type = SCM_RIGHTS;
      c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
      std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
    }
    if (::sendmsg(connection.get(), &message, MSG_NOSIGNAL) < 0) return '\0';
    char answer = '\0';
    return ::recv(connection.get(), &answer, 1, 0) == 1 ? answer : '\0';
  }

  std::vector<std::string> refusals() {
    absl::MutexLock lock(&mu_);
    return refusals_;
  }

  std::filesystem::path dir_;
  std::string path_;
  std::unique_ptr<DescriptorInbox> inbox_;
  absl::Mutex mu_;
  std::vector<std::string> refusals_ ABSL_GUARDED_BY(mu_);
};

TEST_F(DescriptorInboxTest, ADescriptorHandedOverIsTakenOnceUnderItsNonce) {
  Start();
  const UniqueFd memfd = Memfd();
  absl::StatusOr<std::string> nonce = HandOverDescriptor(path_, memfd.get(), kHandOver);
  ASSERT_TRUE(nonce.ok()) << nonce.status();
  EXPECT_EQ(nonce->size(), kDescriptorNonceBytes);
  absl::StatusOr<UniqueFd> taken = inbox_->Take(*nonce);
  ASSERT_TRUE(taken.ok()) << taken.status();
  EXPECT_TRUE(SameFile(taken->get(), memfd.get()));
  EXPECT_TRUE(absl::IsNotFound(inbox_->Take(*nonce).status())) << "one-time";
  EXPECT_TRUE(absl::IsNotFound(inbox_->Take(std::string(16, 'x')).status()));
}

TEST_F(DescriptorInboxTest, TwoHandOversGetTheirOwnNonces) {
  Start();
  const UniqueFd a = Memfd();
  const UniqueFd b = Memfd();
  absl::StatusOr<std::string> nonce_a = HandOverDescriptor(path_, a.get(), kHandOver);
  absl::StatusOr<std::string> nonce_b = HandOverDescriptor(path_, b.get(), kHandOver);
  ASSERT_TRUE(nonce_a.ok() && nonce_b.ok());
  EXPECT_NE(*nonce_a, *nonce_b);
  EXPECT_TRUE(SameFile(inbox_->Take(*nonce_b)->get(), b.get()));
  EXPECT_TRUE(SameFile(inbox_->Take(*nonce_a)->get(), a.get()));
}

TEST_F(DescriptorInboxTest, AMessageWithoutExactlyOneDescriptorOrWithAnotherNonceSizeIsRefused) {
  Start();
  const UniqueFd a = Memfd();
  const UniqueFd b = Memfd();
  const std::string nonce(kDescriptorNonceBytes, 'n');
  EXPECT_EQ(SendRaw(nonce, {}), 'N') << "no descriptor";
  EXPECT_EQ(SendRaw(nonce, {a.get(), b.get()}), 'N') << "two descriptors";
  EXPECT_EQ(SendRaw("short", {a.get()}), 'N') << "a 5-byte nonce";
  EXPECT_EQ(SendRaw(nonce + "more", {a.get()}), 'N') << "a 20-byte nonce";
  EXPECT_TRUE(absl::IsNotFound(inbox_->Take(nonce).status())) << "nothing was kept";
  EXPECT_EQ(SendRaw(nonce, {a.get()}), 'Y');
  EXPECT_EQ(SendRaw(nonce, {b.get()}), 'N') << "a nonce already waiting";
  EXPECT_TRUE(SameFile(inbox_->Take(nonce)->get(), a.get()));
  EXPECT_EQ(refusals(), (std::vector<std::string>{
                            "descriptor_handover_malformed", "descriptor_handover_malformed",
                            "descriptor_handover_malformed", "descriptor_handover_malformed",
                            "descriptor_handover_full"}));
}

TEST_F(DescriptorInboxTest, ItHoldsAtMostItsBoundAndEachForALimitedTime) {
  Start({.max_held = 2, .hold_for = absl::Milliseconds(300)});
  const UniqueFd memfd = Memfd();
  absl::StatusOr<std::string> first = HandOverDescriptor(path_, memfd.get(), kHandOver);
  absl::StatusOr<std::string> second = HandOverDescriptor(path_, memfd.get(), kHandOver);
  ASSERT_TRUE(first.ok() && second.ok());
  const absl::StatusOr<std::string> third = HandOverDescriptor(path_, memfd.get(), kHandOver);
  EXPECT_TRUE(absl::IsUnavailable(third.status())) << third.status();
  EXPECT_THAT(std::string(third.status().message()), HasSubstr("holds too many"));
  EXPECT_TRUE(inbox_->Take(*first).ok());
  absl::SleepFor(absl::Milliseconds(400));
  const absl::StatusOr<UniqueFd> expired = inbox_->Take(*second);
  EXPECT_TRUE(absl::IsNotFound(expired.status()));
  EXPECT_THAT(std::string(expired.status().message()), HasSubstr("waited longer than 300ms"));
  EXPECT_TRUE(HandOverDescriptor(path_, memfd.get(), kHandOver).ok()) << "room again";
}

TEST_F(DescriptorInboxTest, ASilentConnectionIsClosedAndTheNextOneServed) {
  Start({.handover_timeout = absl::Milliseconds(100)});
  const UniqueFd silent = Connect();
  ASSERT_TRUE(silent.valid());
  const UniqueFd memfd = Memfd();
  EXPECT_TRUE(HandOverDescriptor(path_, memfd.get(), kHandOver).ok());
  char answer;
  EXPECT_EQ(::recv(silent.get(), &answer, 1, 0), 0) << "closed unanswered";
  EXPECT_EQ(refusals(), std::vector<std::string>{"descriptor_handover_timeout"});
}

TEST_F(DescriptorInboxTest, ASilentConnectionDelaysNoOtherHandover) {
  // A minute of silence allowed: served one at a time, the handover behind the silent
  // connection would wait that long, past its own deadline.
  Start({.handover_timeout = absl::Minutes(1)});
  const UniqueFd silent = Connect();
  ASSERT_TRUE(silent.valid());
  const UniqueFd memfd = Memfd();
  for (int i = 0; i < 3; ++i) {
    const absl::StatusOr<std::string> nonce = HandOverDescriptor(path_, memfd.get(), kHandOver);
    ASSERT_TRUE(nonce.ok()) << nonce.status();
    EXPECT_TRUE(SameFile(inbox_->Take(*nonce)->get(), memfd.get()));
  }
  EXPECT_TRUE(refusals().empty()) << "the silent connection still has its minute";
}

TEST_F(DescriptorInboxTest, SixteenConnectionsAreServedAtOnceAndTheNextWaitsForARoom) {
  Start({.handover_timeout = absl::Milliseconds(300)});
  std::vector<UniqueFd> silent;
  for (int i = 0; i < 16; ++i) {
    silent.push_back(Connect());
    ASSERT_TRUE(silent.back().valid());
  }
  const UniqueFd memfd = Memfd();
  ASSERT_TRUE(HandOverDescriptor(path_, memfd.get(), kHandOver).ok());
  EXPECT_THAT(refusals(), ::testing::Contains("descriptor_handover_timeout"))
      << "the seventeenth was accepted only once a silent one had been closed";
}

TEST_F(DescriptorInboxTest, NoWorkerThereIsAClearErrorAndItsEndRemovesTheSocket) {
  Start();
  inbox_.reset();
  EXPECT_FALSE(std::filesystem::exists(path_));
  const UniqueFd memfd = Memfd();
  const absl::StatusOr<std::string> nonce = HandOverDescriptor(path_, memfd.get(), kHandOver);
  EXPECT_TRUE(absl::IsUnavailable(nonce.status()));
  EXPECT_THAT(std::string(nonce.status().message()),
              HasSubstr("cannot hand a buffer's descriptor to the worker at " + path_));
}

}  // namespace
}  // namespace ringsync
