// The worker's end of the call channel: every request reaches the intake and every call
// gets exactly one answer, also when the client is slow to read them; a record that no
// client writes breaks the channel instead of being guessed at.
#include "daemon/worker/client_call_channel.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <set>
#include <thread>

#include "core/sync/steady_deadline.h"
#include "core/sync/steady_stopwatch.h"
#include "daemon/worker/registered_buffers.h"
#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringsync {
namespace {

using ::testing::HasSubstr;

constexpr uint64_t kCapacity = 16 << 10;

// The client's side: a registered buffer (a sealed memfd mapped as the worker maps it)
// and the two mailboxes as the SDK uses them.
class Client {
 public:
  Client() {
    fd_ = ::memfd_create("call-channel-test", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    const auto size = static_cast<off_t>(CallChannelLayout::BufferBytes(kCapacity));
    EXPECT_EQ(::ftruncate(fd_, size), 0);
    EXPECT_EQ(::posix_fallocate(fd_, 0, size), 0);
    EXPECT_EQ(::fcntl(fd_, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW), 0);
    const uint64_t id = buffers_.Register(getpid(), getuid(), fd_, static_cast<uint64_t>(size)).value();
    slice_ = buffers_.Find(id, 0, static_cast<uint64_t>(size)).value();
    requests_.emplace(CallChannelLayout::Requests(slice_.bytes, kCapacity), kCapacity);
    answers_.emplace(CallChannelLayout::Answers(slice_.bytes, kCapacity), kCapacity);
  }
  ~Client() { ::close(fd_); }

  const RegisteredBuffers::Slice& slice() const { return slice_; }

  void PutRecord(const std::string& bytes) {
    const absl::Span<const std::byte> pieces[] = {
        {reinterpret_cast<const std::byte*>(bytes.data()), bytes.size()}};
    ASSERT_TRUE(requests_->Put(pieces, {SteadyDeadline(absl::Seconds(10)), nullptr},
                               [] { return false; })
                    .ok());
  }
  void Call(uint64_t id, uint32_t kind) {
    v1::CallRequest call;
    call.set_call_id(id);
    call.set_kind(kind);
    call.mutable_request()->mutable_spec()->set_name("c");
    PutRecord(call.SerializeAsString());
  }
  // The next answer, waiting up to 10 s.
  std::optional<v1::CallAnswer> Answer() {
    const SteadyDeadline deadline(absl::Seconds(10));
    while (!deadline.Passed()) {
      const uint32_t seen = answers_->doorbell();
      auto record = answers_->TryTake();
      EXPECT_TRUE(record.ok());
      if (record->has_value()) {
        v1::CallAnswer answer;
        EXPECT_TRUE(answer.ParseFromArray((*record)->data(), static_cast<int>((*record)->size())));
        return answer;
      }
      answers_->Wait(seen, absl::Milliseconds(20));
    }
    return std::nullopt;
  }

 private:
  int fd_ = -1;
  RegisteredBuffers buffers_{RegisteredBufferLimits{}};
  RegisteredBuffers::Slice slice_;
  std::optional<FrameMailboxWriter> requests_;
  std::optional<FrameMailboxReader> answers_;
};

TEST(ClientCallChannel, EveryRequestReachesTheIntakeAndIsAnsweredOnce) {
  Client client;
  std::atomic<int> submitted{0};
  ClientCallChannel channel(
      client.slice().mapping, client.slice().bytes, kCapacity,
      [&](CollectiveKind kind, const v1::CollectiveRequest& request,
          const ClientCallChannel::Answer& answer) {
        EXPECT_EQ(kind, CollectiveKind::kBroadcast);
        EXPECT_EQ(request.spec().name(), "c");
        ++submitted;
        v1::CallAnswer reply;
        reply.mutable_response()->set_sequence(7);
        answer(reply);
      },
      [](const absl::Status& why) { ADD_FAILURE() << why; });
  std::set<uint64_t> answered;
  for (uint64_t id = 1; id <= 50; ++id) {
    client.Call(id, 2);
    std::optional<v1::CallAnswer> answer = client.Answer();
    ASSERT_TRUE(answer.has_value()) << "call " << id;
    EXPECT_EQ(answer->code(), 0);
    EXPECT_EQ(answer->response().sequence(), 7u);
    EXPECT_TRUE(answered.insert(answer->call_id()).second);
  }
  EXPECT_EQ(submitted.load(), 50);
  EXPECT_EQ(answered.size(), 50u);
}

TEST(ClientCallChannel, AnswersThatDoNotFitWaitForTheClientInsteadOfBlockingTheWorker) {
  Client client;
  std::vector<ClientCallChannel::Answer> held;
  absl::Mutex mu;
  ClientCallChannel channel(
      client.slice().mapping, client.slice().bytes, kCapacity,
      [&](CollectiveKind, const v1::CollectiveRequest&, const ClientCallChannel::Answer& answer) {
        absl::MutexLock lock(&mu);
        held.push_back(answer);
      },
      [](const absl::Status& why) { ADD_FAILURE() << why; });
  constexpr int kCalls = 40;
  for (int id = 1; id <= kCalls; ++id) client.Call(static_cast<uint64_t>(id), 1);
  {
    absl::MutexLock lock(&mu);
    mu.AwaitWithTimeout(absl::Condition(
                            +[](std::vector<ClientCallChannel::Answer>* h) { return h->size() == kCalls; },
                            &held),
                        absl::Seconds(10));
    ASSERT_EQ(held.size(), static_cast<size_t>(kCalls));
  }
  // Forty answers of 1 KiB do not fit 16 KiB: posting them all must not block.
  const SteadyStopwatch start;
  for (auto& answer : held) {
    v1::CallAnswer reply;
    reply.set_message(std::string(1024, 'x'));
    answer(reply);
  }
  EXPECT_LT(start.Elapsed(), absl::Seconds(5));
  std::set<uint64_t> answered;
  for (int i = 0; i < kCalls; ++i) {
    std::optional<v1::CallAnswer> answer = client.Answer();
    ASSERT_TRUE(answer.has_value()) << "answer " << i << " never came";
    answered.insert(answer->call_id());
  }
  EXPECT_EQ(answered.size(), static_cast<size_t>(kCalls));
}

TEST(ClientCallChannel, AnUnknownKindIsRefusedAndGarbageBreaksTheChannel) {
  Client client;
  absl::Notification broken;
  absl::Status why;
  ClientCallChannel channel(
      client.slice().mapping, client.slice().bytes, kCapacity,
      [](CollectiveKind, const v1::CollectiveRequest&, const ClientCallChannel::Answer&) {
        ADD_FAILURE() << "nothing valid was sent";
      },
      [&](const absl::Status& status) {
        why = status;
        broken.Notify();
      });
  client.Call(9, 99);
  std::optional<v1::CallAnswer> refused = client.Answer();
  ASSERT_TRUE(refused.has_value());
  EXPECT_EQ(refused->call_id(), 9u);
  EXPECT_EQ(refused->code(), static_cast<int>(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(refused->message(), HasSubstr("unknown kind 99"));

  client.PutRecord(std::string("\xff\xff\xff garbage", 11));
  ASSERT_TRUE(broken.WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_THAT(std::string(why.message()), HasSubstr("not a CallRequest"));
}

}  // namespace
}  // namespace ringsync
