// A grpc-ring-bench rank on gRPC's callback API, as the workers' peer streams are: a
// Receiver reactor counts what the left neighbour sends, a Sender reactor streams each
// round to the right one, each write started from the previous one's completion (under
// the ring schedule, from the read's completion that frees the next segment).
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "bench/grpc_ring_rank.h"
#include "grpcpp/generic/async_generic_service.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"

namespace ringsync::bench {
namespace {

class Sender;

// Bytes (and messages) received from the left neighbour, over the rank's whole life.
class Inbox {
 public:
  // Counts a message; a sender waiting for it (--schedule=ring) may go on.
  void Add(uint64_t bytes);
  uint64_t messages() const { return messages_.load(); }
  // The rank's sender under the ring schedule, told of each message (null: none; the
  // free schedule's sender never waits for one).
  void SetWaitingSender(Sender* sender) { sender_.store(sender); }
  void AwaitAtLeast(uint64_t total) {
    absl::MutexLock lock(&mu_);
    auto enough = [this, total]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return received_ >= total; };
    mu_.Await(absl::Condition(&enough));
  }

 private:
  absl::Mutex mu_;
  uint64_t received_ ABSL_GUARDED_BY(mu_) = 0;
  std::atomic<uint64_t> messages_{0};
  std::atomic<Sender*> sender_{nullptr};
};

// The receiving end: reads every message and counts its bytes.
class Receiver final : public grpc::ServerGenericBidiReactor {
 public:
  explicit Receiver(Inbox& inbox) : inbox_(inbox) { StartRead(&buffer_); }
  void OnReadDone(bool ok) override {
    if (!ok) {
      Finish(grpc::Status::OK);
      return;
    }
    inbox_.Add(buffer_.Length());
    buffer_.Clear();
    StartRead(&buffer_);
  }
  void OnDone() override { delete this; }

 private:
  Inbox& inbox_;
  grpc::ByteBuffer buffer_;
};

class RingService final : public grpc::CallbackGenericService {
 public:
  explicit RingService(Inbox& inbox) : inbox_(inbox) {}
  grpc::ServerGenericBidiReactor* CreateReactor(grpc::GenericCallbackServerContext*) override {
    return new Receiver(inbox_);
  }

 private:
  Inbox& inbox_;
};

// The sending end: Send(bytes) streams that many bytes as segments; each next write

class Sender final : public grpc::ClientBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  Sender(std::shared_ptr<grpc::Channel> channel, size_t segment, const Inbox& inbox)
      : stub_(std::move(channel)), source_(segment), inbox_(inbox) {
    context_.set_wait_for_ready(true);
    stub_.PrepareBidiStreamingCall(&context_, kRingMethod, grpc::StubOptions(), this);
    AddHold();
    StartCall();
  }
  ~Sender() override {
    StartWritesDone();
    RemoveHold();
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(&done_));
  }

  // Sends the messages `sizes` in order. With `lag` > 0, message m >= lag waits until
  // the inbox has counted m - lag + 1 messages beyond `round_base` (all rounds before
  // this one: the left neighbour may be ahead, so its count when this round starts is not).
  void Send(std::vector<size_t> sizes, size_t lag, uint64_t round_base) {
    absl::MutexLock lock(&mu_);
    sizes_ = std::move(sizes);
    next_ = 0;
    lag_ = lag;
    round_base_ = round_base;
    StartNextLocked();
    auto sent = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
      return next_ == sizes_.size() && !in_flight_;
    };
    mu_.Await(absl::Condition(&sent));
  }

  // A message arrived from the left: the next segment may be free to go.
  void Kick() {
    absl::MutexLock lock(&mu_);
    StartNextLocked();
  }

  void OnWriteDone(bool ok) override {
    absl::MutexLock lock(&mu_);
    in_flight_ = false;
    if (!ok) {
      std::fprintf(stderr, "grpc-ring-bench: a write failed\n");
      std::_Exit(1);
    }
    StartNextLocked();
  }
  void OnDone(const grpc::Status&) override {
    absl::MutexLock lock(&mu_);
    done_ = true;
  }

 private:
  void StartNextLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (next_ == sizes_.size() || in_flight_) return;
    if (lag_ > 0 && next_ >= lag_ && inbox_.messages() < round_base_ + next_ - lag_ + 1) return;
    grpc::Slice slice(source_.data(), sizes_[next_], grpc::Slice::STATIC_SLICE);
    buffer_ = grpc::ByteBuffer(&slice, 1);
    ++next_;
    in_flight_ = true;
    StartWrite(&buffer_);
  }

  grpc::GenericStub stub_;
  grpc::ClientContext context_;
  const std::vector<char> source_;
  const Inbox& inbox_;
  absl::Mutex mu_;
  grpc::ByteBuffer buffer_ ABSL_GUARDED_BY(mu_);
  std::vector<size_t> sizes_ ABSL_GUARDED_BY(mu_);  // this round's messages
  size_t next_ ABSL_GUARDED_BY(mu_) = 0;
  size_t lag_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t round_base_ ABSL_GUARDED_BY(mu_) = 0;  // inbox messages of the rounds before
  bool in_flight_ ABSL_GUARDED_BY(mu_) = false;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
};

void Inbox::Add(uint64_t bytes) {
  {
    absl::MutexLock lock(&mu_);
    received_ += bytes;
  }
  ++messages_;
  if (Sender* sender = sender_.load()) sender->Kick();
}

}  // namespace

int CallbackRankMain(const RingConfig& config, int from_parent, int to_parent) {
  Inbox inbox;
  RingService service(inbox);
  grpc::ServerBuilder builder;
  int port = 0;
  ListenOnLoopback(builder, &port);
  builder.RegisterCallbackGenericService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) return 1;
  auto sender = std::make_unique<Sender>(ChannelToNext(port, from_parent, to_parent),
                                         static_cast<size_t>(config.segment), inbox);
  if (config.ring_schedule) inbox.SetWaitingSender(sender.get());
  uint64_t received_bytes = 0;   // what the left neighbour has sent by the end of this round
  uint64_t messages_before = 0;  // messages it sent in the rounds before this one
  const bool ok = TimeRounds(config, from_parent, to_parent, [&](const RoundPlan& plan) {
    sender->Send(plan.sizes, plan.lag, messages_before);
    messages_before += plan.sizes.size();
    for (size_t bytes : plan.sizes) received_bytes += bytes;
    inbox.AwaitAtLeast(received_bytes);
    return true;
  });
  inbox.SetWaitingSender(nullptr);
  sender.reset();
  server->Shutdown(absl::ToChronoTime(absl::Now() + absl::Seconds(2)));
  return ok ? 0 : 1;
}

}  // namespace ringsync::bench
