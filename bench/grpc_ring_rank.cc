#include "bench/grpc_ring_rank.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "bench/bench_table.h"
#include "wire/grpc_options.h"

namespace ringsync::bench {
namespace {

// `bytes` cut into messages of at most `segment`.
std::vector<size_t> Segments(size_t bytes, size_t segment) {
  std::vector<size_t> sizes;
  for (size_t at = 0; at < bytes; at += segment) sizes.push_back(std::min(segment, bytes - at));
  return sizes;
}

}  // namespace

RoundPlan PlanRound(const RingConfig& config, int64_t size) {
  const size_t segment = static_cast<size_t>(config.segment);
  const size_t chunk = static_cast<size_t>(size / config.nranks);
  const size_t steps = 2 * static_cast<size_t>(config.nranks - 1);
  if (!config.ring_schedule) return {Segments(chunk * steps, segment), 0};
  const std::vector<size_t> chunk_segments = Segments(chunk, segment);
  RoundPlan plan;
  for (size_t step = 0; step < steps; ++step) {
    plan.sizes.insert(plan.sizes.end(), chunk_segments.begin(), chunk_segments.end());
  }
  plan.lag = chunk_segments.size();
  return plan;
}

std::vector<int64_t> RingSizes(const RingConfig& config) {
  const std::vector<size_t> counts = SweepCounts(config.sweep, 1);
  return std::vector<int64_t>(counts.begin(), counts.end());
}

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

void ListenOnLoopback(grpc::ServerBuilder& builder, int* port) {
  ConfigureServerBuilder(builder, -1, KeepaliveSettings{});
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), port);
}

std::shared_ptr<grpc::Channel> ChannelToNext(int port, int from_parent, int to_parent) {
  WriteLine(to_parent, absl::StrCat(port));
  const std::string next = ReadLine(from_parent);
  return grpc::CreateCustomChannel(absl::StrCat("127.0.0.1:", next),
                                   grpc::InsecureChannelCredentials(),
                                   PeerChannelArguments(KeepaliveSettings{}));
}

bool TimeRounds(const RingConfig& config, int from_parent, int to_parent,
                absl::FunctionRef<bool(const RoundPlan&)> round) {
  for (int64_t size : RingSizes(config)) {
    const RoundPlan plan = PlanRound(config, size);
    const auto [iters, warmups] = IterationsFor(size, config.sweep.iters, config.sweep.warmup_iters);
    absl::Time start;
    for (int64_t i = 0; i < warmups + iters; ++i) {
      if (i == warmups) {
        WriteLine(to_parent, "ready");
        if (ReadLine(from_parent) != "go") return false;
        start = absl::Now();
      }
      if (!round(plan)) return false;
    }
    const double seconds = absl::ToDoubleSeconds(absl::Now() - start) / static_cast<double>(iters);
    WriteLine(to_parent, absl::StrCat(seconds));
  }
  return true;
}

}  // namespace ringsync::bench
