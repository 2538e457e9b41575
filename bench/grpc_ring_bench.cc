// grpc-ring-bench: the ceiling of the transport the ring runs on. N processes on
// 127.0.0.1 form a ring of gRPC bidi streams with the same channel arguments as the
// workers' peer streams; for an "all-reduce" of S bytes each rank streams what a ring
// all-reduce moves per rank, 2(N-1)/N * S bytes, to its right neighbour in zero-copy
// segments (a slice pointing at static memory, no encoding) while receiving as much from
// its left one (counted, never touched). No schedule, no reduction, no waiting for the
// previous step: busbw here is what the ring could reach if its own work cost nothing.
// With --schedule=ring the same bytes keep a ring all-reduce's data dependency: the
// round is 2(N-1) steps of S/N bytes in segments, and segment j of step s leaves only
// once segment j of step s-1 has arrived from the left (started from that read's
// completion when the stream had run dry), still without touching the bytes — what the
// ring could reach with a schedule but no reduction, copies or threads of its own.
// The ranks use gRPC's callback API, as the workers do; with --api=cq one thread per rank
// drives both of its streams through a completion queue instead (the thread waiting for
// completions polls the sockets itself, so no completion is handed to a callback thread):
// what the same bytes cost under the other API gRPC offers.
// Same columns as ringsync-bench (type "bytes", redop "none", #wrong always 0), so
// bench/compare_with_gloo.sh can show it as a column (PEERS="ringsync grpc-ring").
//
//   grpc-ring-bench --nranks=4 --min_bytes=16M --max_bytes=256M --segment_bytes=1M
//
// The ranks are forked before any gRPC state exists; the parent only relays the ports
// and start signals over pipes and prints the rows.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "bench/bench_table.h"
#include "bench/peer_sweep.h"
#include "daemon/process/heap_retention.h"
#include "grpcpp/generic/async_generic_service.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "wire/grpc_options.h"

ABSL_FLAG(int, nranks, 4, "ranks (processes) on 127.0.0.1");
ABSL_FLAG(std::string, segment_bytes, "1M", "bytes per gRPC message (the workers' --segment_bytes)");
ABSL_FLAG(std::string, api, "callback",
          "callback: gRPC's callback reactors (as the workers); cq: one thread per rank drives "
          "both streams through a completion queue");
ABSL_FLAG(std::string, schedule, "free",
          "free: stream each round's bytes back to back; ring: a segment leaves only once the "
          "segment it forwards arrived (a ring all-reduce's dependency, see above)");
// The sweep flags are bench/peer_sweep.h's (--min_bytes is the all-reduce size S);
// --dtype, --op and --check are accepted and ignored: bytes are not reduced.

namespace {

constexpr char kMethod[] = "/bench.Ring/Stream";

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
// starts from the previous one's completion, so the socket never waits for a thread.
class Sender final : public grpc::ClientBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  Sender(std::shared_ptr<grpc::Channel> channel, size_t segment, const Inbox& inbox)
      : stub_(std::move(channel)), source_(segment), inbox_(inbox) {
    context_.set_wait_for_ready(true);
    stub_.PrepareBidiStreamingCall(&context_, kMethod, grpc::StubOptions(), this);
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

namespace bench = ringsync::bench;

struct Config {
  int nranks;
  bench::PeerSweep sweep;
  int64_t segment;
  bool ring_schedule;
};

// `bytes` cut into messages of at most `segment`.
std::vector<size_t> Segments(size_t bytes, size_t segment) {
  std::vector<size_t> sizes;
  for (size_t at = 0; at < bytes; at += segment) sizes.push_back(std::min(segment, bytes - at));
  return sizes;
}

// One round's messages, 2(N-1) chunks of size/N bytes, and the lag of the ring schedule
// (a segment forwards the one a chunk's segments earlier). The free schedule (lag 0)
// streams the round's bytes in segments across chunk boundaries.
std::pair<std::vector<size_t>, size_t> RoundPlan(const Config& c, int64_t size) {
  const size_t segment = static_cast<size_t>(c.segment);
  const size_t chunk = static_cast<size_t>(size / c.nranks);
  const size_t steps = 2 * static_cast<size_t>(c.nranks - 1);
  if (!c.ring_schedule) return {Segments(chunk * steps, segment), 0};
  const std::vector<size_t> chunk_segments = Segments(chunk, segment);
  std::vector<size_t> sizes;
  for (size_t step = 0; step < steps; ++step) {
    sizes.insert(sizes.end(), chunk_segments.begin(), chunk_segments.end());
  }
  return {std::move(sizes), chunk_segments.size()};
}

std::vector<int64_t> Sizes(const Config& c) {
  const std::vector<size_t> counts = bench::SweepCounts(c.sweep, 1);
  return std::vector<int64_t>(counts.begin(), counts.end());
}

// Line-at-a-time pipe messages between the parent and a rank.
std::string ReadLine(int fd) {
  std::string line;
  char ch = 0;
  while (::read(fd, &ch, 1) == 1 && ch != '\n') line.push_back(ch);
  return line;
}
void WriteLine(int fd, const std::string& line) {
  const std::string text = line + "\n";
  if (::write(fd, text.data(), text.size()) != static_cast<ssize_t>(text.size())) std::_Exit(1);
}

int RankMain(const Config& c, int from_parent, int to_parent) {
  Inbox inbox;
  RingService service(inbox);
  grpc::ServerBuilder builder;
  ringsync::ConfigureServerBuilder(builder, -1, ringsync::KeepaliveSettings{});
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterCallbackGenericService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) return 1;
  WriteLine(to_parent, absl::StrCat(port));
  const std::string next = ReadLine(from_parent);
  auto sender = std::make_unique<Sender>(
      grpc::CreateCustomChannel(absl::StrCat("127.0.0.1:", next), grpc::InsecureChannelCredentials(),
                                ringsync::PeerChannelArguments(ringsync::KeepaliveSettings{})),
      static_cast<size_t>(c.segment), inbox);
  if (c.ring_schedule) inbox.SetWaitingSender(sender.get());
  uint64_t expected = 0;
  uint64_t messages_before = 0;
  for (int64_t size : Sizes(c)) {
    const auto [plan, lag] = RoundPlan(c, size);
    uint64_t per_round = 0;
    for (size_t bytes : plan) per_round += bytes;
    const auto [iters, warmups] = bench::IterationsFor(size, c.sweep.iters, c.sweep.warmup_iters);
    absl::Time start;
    for (int64_t i = 0; i < warmups + iters; ++i) {
      if (i == warmups) {
        WriteLine(to_parent, "ready");
        if (ReadLine(from_parent) != "go") return 1;
        start = absl::Now();
      }
      sender->Send(plan, lag, messages_before);
      messages_before += plan.size();
      expected += per_round;
      inbox.AwaitAtLeast(expected);
    }
    const double seconds = absl::ToDoubleSeconds(absl::Now() - start) / static_cast<double>(iters);
    WriteLine(to_parent, absl::StrCat(seconds));
  }
  inbox.SetWaitingSender(nullptr);
  sender.reset();
  server->Shutdown(absl::ToChronoTime(absl::Now() + absl::Seconds(2)));
  return 0;
}

// The same rank driven through gRPC's completion-queue API by one thread, --api=cq: the
// thread that waits in Next() polls the sockets itself, so a read's or a write's
// completion reaches the code that starts the next one without passing through gRPC's
// callback threads.
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
    outbound_ = stub_->PrepareCall(&client_context_, kMethod, &cq_);
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

int CqRankMain(const Config& c, int from_parent, int to_parent) {
  grpc::AsyncGenericService service;
  grpc::ServerBuilder builder;
  ringsync::ConfigureServerBuilder(builder, -1, ringsync::KeepaliveSettings{});
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterAsyncGenericService(&service);
  std::unique_ptr<grpc::ServerCompletionQueue> cq = builder.AddCompletionQueue();
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) return 1;
  CqRank rank(service, *cq, static_cast<size_t>(c.segment));
  WriteLine(to_parent, absl::StrCat(port));
  const std::string next = ReadLine(from_parent);
  if (!rank.Connect(grpc::CreateCustomChannel(
          absl::StrCat("127.0.0.1:", next), grpc::InsecureChannelCredentials(),
          ringsync::PeerChannelArguments(ringsync::KeepaliveSettings{})))) {
    return 1;
  }
  uint64_t messages_before = 0;
  for (int64_t size : Sizes(c)) {
    const auto [plan, lag] = RoundPlan(c, size);
    const auto [iters, warmups] = bench::IterationsFor(size, c.sweep.iters, c.sweep.warmup_iters);
    absl::Time start;
    for (int64_t i = 0; i < warmups + iters; ++i) {
      if (i == warmups) {
        WriteLine(to_parent, "ready");
        if (ReadLine(from_parent) != "go") return 1;
        start = absl::Now();
      }
      // The left neighbour sends as many messages per round as this rank.
      if (!rank.Round(plan, lag, messages_before, messages_before + plan.size())) return 1;
      messages_before += plan.size();
    }
    const double seconds = absl::ToDoubleSeconds(absl::Now() - start) / static_cast<double>(iters);
    WriteLine(to_parent, absl::StrCat(seconds));
  }
  // Every rank has received all it will: wait for the parent to close the pipe, then
  // leave without unwinding the streams (their pending read would need the queue drained).
  ReadLine(from_parent);
  std::_Exit(0);
}

}  // namespace

int main(int argc, char** argv) {
  // As the worker does: gRPC's received slices reuse freed heap memory instead of being
  // faulted in afresh (on a VM with ~11 us page faults a 64 MiB round took 1.3 s instead
  // of 69 ms: 8x slower than the worker ring this ceiling bounds).
  ringsync::KeepFreedHeapMemory();
  absl::ParseCommandLine(argc, argv);
  const std::optional<bench::PeerSweep> sweep = bench::ReadPeerSweep("grpc-ring-bench");
  if (!sweep) return 2;
  const std::string schedule = absl::GetFlag(FLAGS_schedule);
  const std::string api = absl::GetFlag(FLAGS_api);
  const Config c{absl::GetFlag(FLAGS_nranks), *sweep,
                 bench::ParseSize(absl::GetFlag(FLAGS_segment_bytes)), schedule == "ring"};
  if (c.nranks < 2 || c.nranks > 64 || c.sweep.min_bytes < c.nranks || c.segment <= 0 ||
      (schedule != "free" && schedule != "ring") || (api != "callback" && api != "cq") ||
      c.sweep.collective != "allreduce") {
    std::fprintf(stderr, "grpc-ring-bench: bad flags (nranks 2..64, nranks <= min_bytes, "
                         "segment_bytes > 0, schedule free or ring, api callback or cq, "
                         "collective allreduce: "
                         "the ring moves an all-reduce's bytes)\n");
    return 2;
  }
  const int n = c.nranks;
  std::vector<int> to_rank(n), from_rank(n);
  std::vector<pid_t> pids;
  std::fflush(stdout);
  for (int r = 0; r < n; ++r) {
    int down[2], up[2];
    if (::pipe(down) != 0 || ::pipe(up) != 0) return 1;
    const pid_t pid = fork();
    if (pid == 0) {
      ::close(down[1]);
      ::close(up[0]);
      _exit(api == "cq" ? CqRankMain(c, down[0], up[1])
                        : RankMain(c, down[0], up[1]));
    }
    ::close(down[0]);
    ::close(up[1]);
    to_rank[r] = down[1];
    from_rank[r] = up[0];
    pids.push_back(pid);
  }
  std::vector<std::string> ports(n);
  for (int r = 0; r < n; ++r) ports[r] = ReadLine(from_rank[r]);
  for (int r = 0; r < n; ++r) WriteLine(to_rank[r], ports[(r + 1) % n]);

  const double bus = 2.0 * (n - 1) / n;
  std::printf("# grpc-ring-bench: nranks %d, segment %lld B, %s schedule, %s API, zero-copy byte "
              "streams around the ring, 2(N-1)/N * size bytes per rank per round, no "
              "reduction\n",
              n, static_cast<long long>(c.segment), schedule.c_str(),
              api.c_str());
  std::printf("# time = max over ranks of (batch wall time / iters); busbw = algbw * %.3f\n#\n", bus);
  bench::PrintColumnHeads();
  int status = 0;
  for (int64_t size : Sizes(c)) {
    bool ok = true;
    for (int r = 0; r < n; ++r) ok = ok && ReadLine(from_rank[r]) == "ready";
    if (!ok) {
      status = 1;
      break;
    }
    for (int r = 0; r < n; ++r) WriteLine(to_rank[r], "go");
    double slowest = 0;
    for (int r = 0; r < n; ++r) {
      double t = 0;
      if (!absl::SimpleAtod(ReadLine(from_rank[r]), &t)) status = 1;
      slowest = std::max(slowest, t);
    }
    if (status != 0) break;
    bench::PrintRow(size, size, "bytes", "none", slowest, bus, 0);
  }
  for (int r = 0; r < n; ++r) ::close(to_rank[r]);
  for (pid_t pid : pids) {
    int rank_status = 0;
    if (waitpid(pid, &rank_status, 0) != pid || !WIFEXITED(rank_status) ||
        WEXITSTATUS(rank_status) != 0) {
      status = 1;
    }
  }
  return status;
}
