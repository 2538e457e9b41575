// A grpc-ring-bench rank on gRPC's completion-queue API (--api=cq): one thread drives
// both of the rank's streams. The thread that waits in Next() polls the sockets itself,
// so a read's or a write's completion reaches the code that starts the next one without
// passing through gRPC's callback threads.
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "bench/grpc_ring_rank.h"
#include "grpcpp/generic/async_generic_service.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"

namespace ringsync::bench {
namespace {

// The rank's two streams and the state of its rounds, touched only by the thread that
// drives the queue.
class CqRank {
 public:
  enum Tag : intptr_t { kAccepted = 1, kStarted, kRead, kWritten };

  CqRank(grpc::AsyncGenericService& service, grpc::ServerCompletionQueue& cq, size_t segment)
      : cq_(cq), inbound_(&server_context_), source_(segment) {
    service.RequestCall(&server_context_, &inbound_, &cq_, &cq_, TagOf(kAccepted));
  }

  // Opens the stream to the right neighbour and waits until both streams are up.
  bool Connect(std::shared_ptr<grpc::Channel> channel) {
    stub_ = std::make_unique<grpc::GenericStub>(std::move(channel));
    client_context_.set_wait_for_ready(true);
    outbound_ = stub_->PrepareCall(&client_context_, kRingMethod, &cq_);
    outbound_->StartCall(TagOf(kStarted));
    while (!accepted_ || !started_) {
      if (!Step()) return false;
    }
    return true;
  }

  // One round: `sizes` out under the ring schedule's `lag`, until `expected` messages
  // in total have arrived from the left.
  bool Round(const std::vector<size_t>& sizes, size_t lag, uint64_t round_base,
             uint64_t expected) {
    size_t next = 0;
    while (next < sizes.size() || writing_ || received_ < expected) {
      if (!writing_ && next < sizes.size() &&
          (lag == 0 || next < lag || received_ >= round_base + next - lag + 1)) {
        grpc::Slice slice(source_.data(), sizes[next], grpc::Slice::STATIC_SLICE);
        write_buffer_ = grpc::ByteBuffer(&slice, 1);
        ++next;
        writing_ = true;
        outbound_->Write(write_buffer_, TagOf(kWritten));
      }
      if (!Step()) return false;
    }
    return true;
  }

 private:
  static void* TagOf(Tag tag) { return reinterpret_cast<void*>(static_cast<intptr_t>(tag)); }

  // Waits for one completion and handles it.
  bool Step() {
    void* tag = nullptr;
    bool ok = false;
    if (!cq_.Next(&tag, &ok) || !ok) return false;
    switch (static_cast<Tag>(reinterpret_cast<intptr_t>(tag))) {
      case kAccepted:
        accepted_ = true;
        inbound_.Read(&read_buffer_, TagOf(kRead));
        break;
      case kStarted:
        started_ = true;
        break;
      case kRead:
        ++received_;
        read_buffer_.Clear();
        inbound_.Read(&read_buffer_, TagOf(kRead));
        break;
      case kWritten:
        writing_ = false;
        break;
    }
    return true;
  }

  grpc::ServerCompletionQueue& cq_;
  grpc::GenericServerContext server_context_;
  grpc::GenericServerAsyncReaderWriter inbound_;
  std::unique_ptr<grpc::GenericStub> stub_;
  grpc::ClientContext client_context_;
  std::unique_ptr<grpc::GenericClientAsyncReaderWriter> outbound_;
  const std::vector<char> source_;
  grpc::ByteBuffer read_buffer_;
  grpc::ByteBuffer write_buffer_;
  bool accepted_ = false;
  bool started_ = false;
  bool writing_ = false;
  uint64_t received_ = 0;  // messages from the left, over the rank's life
};

}  // namespace

int CqRankMain(const RingConfig& config, int from_parent, int to_parent) {
  grpc::AsyncGenericService service;
  grpc::ServerBuilder builder;
  int port = 0;
  ListenOnLoopback(builder, &port);
  builder.RegisterAsyncGenericService(&service);
  std::unique_ptr<grpc::ServerCompletionQueue> cq = builder.AddCompletionQueue();
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) return 1;
  CqRank rank(service, *cq, static_cast<size_t>(config.segment));
  if (!rank.Connect(ChannelToNext(port, from_parent, to_parent))) std::_Exit(1);
  uint64_t messages_before = 0;  // messages the left neighbour sent in the rounds before
  const bool ok = TimeRounds(config, from_parent, to_parent, [&](const RoundPlan& plan) {
    // The left neighbour sends as many messages per round as this rank.
    const uint64_t expected = messages_before + plan.sizes.size();
    const bool done = rank.Round(plan.sizes, plan.lag, messages_before, expected);
    messages_before = expected;
    return done;
  });
  // A rank that finished has received all it will: it waits for the parent to close the
  // pipe (every rank finished), then leaves without unwinding the streams, whose pending
  // read would need the queue drained. Any exit unwinds nothing, for the same reason.
  if (ok) ReadLine(from_parent);
  std::_Exit(ok ? 0 : 1);
}

}  // namespace ringsync::bench
