// One rank of grpc-ring-bench (grpc_ring_bench.cc): what it streams in a round, how it
// talks to the parent process, and the two ways a rank drives its streams — gRPC's
// callback reactors (grpc_ring_callback_rank.cc) or one thread on a completion queue
// (grpc_ring_cq_rank.cc). A rank serves its left neighbour's stream, opens its own to
// the right neighbour at the port the parent relays, and runs the sweep's rounds.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "bench/peer_sweep.h"
#include "grpcpp/grpcpp.h"

namespace ringsync::bench {

// The generic method every rank's stream calls (no proto: the payload is raw bytes).
inline constexpr char kRingMethod[] = "/bench.Ring/Stream";

struct RingConfig {
  int nranks = 0;
  PeerSweep sweep;
  int64_t segment = 0;         // bytes per message
  bool ring_schedule = false;  // --schedule=ring
};

// One round of an all-reduce of `size` bytes: 2(N-1) chunks of size/N bytes in messages
// of at most the segment, and the lag of the ring schedule (segment m of a round leaves
// once message m - lag + 1 of it has arrived: the one it forwards). The free schedule
// (lag 0) streams the round's bytes in segments across chunk boundaries.
struct RoundPlan {
  std::vector<size_t> sizes;
  size_t lag = 0;
};
RoundPlan PlanRound(const RingConfig& config, int64_t size);

// The sweep's sizes (bytes).
std::vector<int64_t> RingSizes(const RingConfig& config);

// Line-at-a-time messages on the pipes between the parent and a rank. ReadLine returns
// "" at end of file; WriteLine ends the process if the parent is gone.
std::string ReadLine(int fd);
void WriteLine(int fd, const std::string& line);

// Prepares `builder` to serve the left neighbour's stream on 127.0.0.1 with the workers'
// server settings; `port` is set by BuildAndStart.
void ListenOnLoopback(grpc::ServerBuilder& builder, int* port);
// Tells the parent this rank's `port`, learns the right neighbour's, and returns a
// channel to it with the workers' channel arguments.
std::shared_ptr<grpc::Channel> ChannelToNext(int port, int from_parent, int to_parent);

// Runs the sweep: for each size its warm-up rounds, "ready" to the parent, its timed
// rounds once the parent answers "go", then the seconds per timed round. `round` runs
// one round of the plan (false: it failed). False when a round or the parent failed.
bool TimeRounds(const RingConfig& config, int from_parent, int to_parent,
                absl::FunctionRef<bool(const RoundPlan&)> round);

// A rank's whole life; the process's exit status.
int CallbackRankMain(const RingConfig& config, int from_parent, int to_parent);
int CqRankMain(const RingConfig& config, int from_parent, int to_parent);

}  // namespace ringsync::bench
