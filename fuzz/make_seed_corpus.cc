// Writes the seed corpus of the fuzz targets (fuzz/corpus/<target>/) from real messages:
// frames and hellos as the transport encodes them, requests as the SDK fills them in,
// and a worker's join / heartbeat / leave exchange with the coordinator. Run it again
// when the messages change:  build-fuzz/bin/fuzz_seed_corpus fuzz/corpus
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/collective.h"
#include "daemon/transport/grpc/frame_codec.h"
#include "grpcpp/support/byte_buffer.h"
#include "ringsync/v1/coordinator.pb.h"
#include "ringsync/v1/worker.pb.h"
#include "wire/collective_request.h"

namespace ringsync {
namespace {

namespace fs = std::filesystem;

void Write(const fs::path& dir, const std::string& name, const std::string& bytes) {
  fs::create_directories(dir);
  std::ofstream(dir / name, std::ios::binary) << bytes;
}

std::string Flatten(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  std::string out;
  if (!buffer.Dump(&slices).ok()) return out;
  for (const grpc::Slice& slice : slices) {
    out.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
  }
  return out;
}

CollectiveSpec Spec(CollectiveKind kind, uint64_t count) {
  CollectiveSpec spec;
  spec.kind = kind;
  spec.name = "grad/fc1";
  spec.sequence = 17;
  spec.dtype = kind == CollectiveKind::kBarrier ? DType::kFloat32 : DType::kBFloat16;
  spec.count = kind == CollectiveKind::kBarrier ? 0 : count;
  spec.op = ReduceOp::kAvg;
  return spec;
}

// frame_decoder_fuzzer: [how to cut into slices][message].
void FrameSeeds(const fs::path& dir) {
  std::vector<std::byte> payload(64);
  for (size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<std::byte>(i * 7 + 3);
  Frame segment;
  segment.sender_rank = 2;
  segment.generation = 9;
  segment.sequence = 17;
  segment.step = 3;
  segment.segment = 1;
  segment.offset = 1000;
  segment.count = 32;
  Frame first = segment;
  first.spec = Spec(CollectiveKind::kAllReduce, 4096);
  Frame agree = segment;
  agree.kind = FrameKind::kAgree;
  agree.chunk = 1;
  agree.spec = Spec(CollectiveKind::kAllGather, 100);
  Frame commit = segment;
  commit.kind = FrameKind::kCommit;
  commit.chunk = 3;
  Frame abort = segment;
  abort.kind = FrameKind::kAbort;
  abort.abort_origin = 1;
  abort.abort_reason = "collective #17 'grad/fc1': deadline exceeded";
  Frame abort_before_commit = abort;
  abort_before_commit.abort_before_commit = true;
  const auto frame = [&](const Frame& f, absl::Span<const std::byte> bytes, char cuts) {
    return std::string(1, cuts) + Flatten(EncodeFrame(f, bytes, nullptr));
  };
  Write(dir, "segment", frame(segment, payload, 0));
  Write(dir, "segment-in-three-slices", frame(segment, payload, 4 * 20 + 2));
  Write(dir, "first-segment-with-spec", frame(first, payload, 1));
  Write(dir, "agree", frame(agree, {}, 0));
  Write(dir, "commit", frame(commit, {}, 0));
  Write(dir, "abort", frame(abort, {}, 0));
  Write(dir, "abort-before-commit", frame(abort_before_commit, {}, 0));
  Write(dir, "hello", std::string(1, 0) + Flatten(EncodeHello({1, 9, "worker-1"})));
}

// worker_request_fuzzer: [the RPC: kind - 1][CollectiveRequest].
void RequestSeeds(const fs::path& dir) {
  const auto request = [](CollectiveKind kind, uint64_t count) {
    v1::CollectiveRequest r;
    SetRequestSpec(Spec(kind, count), &r);
    r.set_client_sequence(1);
    r.set_timeout_ms(30000);
    return r;
  };
  const auto seed = [](CollectiveKind kind, const v1::CollectiveRequest& r) {
    return std::string(1, static_cast<char>(static_cast<int>(kind) - 1)) + r.SerializeAsString();
  };
  v1::CollectiveRequest allreduce = request(CollectiveKind::kAllReduce, 4);
  allreduce.set_inline_data(std::string(8, '\x3f'));
  Write(dir, "allreduce-inline", seed(CollectiveKind::kAllReduce, allreduce));
  v1::CollectiveRequest broadcast = request(CollectiveKind::kBroadcast, 2);
  broadcast.mutable_spec()->set_root(1);
  broadcast.set_inline_data(std::string(4, '\x01'));
  Write(dir, "broadcast-inline", seed(CollectiveKind::kBroadcast, broadcast));
  v1::CollectiveRequest gather = request(CollectiveKind::kAllGather, 1 << 20);
  v1::SharedTensor* shared = gather.mutable_shared();
  shared->set_path("/dev/shm/ringsync-4242-0");
  shared->set_size_bytes(4 << 20);
  Write(dir, "allgather-shared", seed(CollectiveKind::kAllGather, gather));
  Write(dir, "barrier", seed(CollectiveKind::kBarrier, request(CollectiveKind::kBarrier, 0)));
  v1::CollectiveRequest scatter = request(CollectiveKind::kReduceScatter, 8);
  scatter.set_inline_data(std::string(16, '\x3f'));
  Write(dir, "reducescatter-inline", seed(CollectiveKind::kReduceScatter, scatter));
  v1::CollectiveRequest dealt = request(CollectiveKind::kScatter, 8);  // a non-root's
  dealt.mutable_spec()->set_root(1);
  dealt.mutable_shared()->set_path("/dev/shm/ringsync-4242-1");
  dealt.mutable_shared()->set_size_bytes(16);
  dealt.set_input_left_out(true);
  Write(dir, "scatter-shared-left-out", seed(CollectiveKind::kScatter, dealt));
  v1::CollectiveRequest collected = request(CollectiveKind::kGather, 2);  // a non-root's
  collected.mutable_spec()->set_root(2);
  collected.set_inline_data(std::string(8, '\x3f'));
  collected.set_output_left_out(true);
  Write(dir, "gather-inline-output-left-out", seed(CollectiveKind::kGather, collected));
  v1::CollectiveRequest exchanged = request(CollectiveKind::kAllToAll, 6);
  exchanged.set_inline_data(std::string(12, '\x3f'));
  Write(dir, "alltoall-inline", seed(CollectiveKind::kAllToAll, exchanged));
  v1::CollectiveRequest uneven = request(CollectiveKind::kAllToAll, 5);
  for (uint64_t count : {2, 0, 3}) uneven.mutable_spec()->add_send_counts(count);
  for (uint64_t count : {1, 4, 0}) uneven.mutable_spec()->add_receive_counts(count);
  uneven.set_inline_data(std::string(10, '\x3f'));
  Write(dir, "alltoallv-inline", seed(CollectiveKind::kAllToAll, uneven));
  v1::CollectiveRequest refused = request(CollectiveKind::kAllReduce, 4);
  refused.set_refused_by_client("count 4 but the tensor holds 3 elements");
  Write(dir, "refused-by-client", seed(CollectiveKind::kAllReduce, refused));
}

// coordinator_request_fuzzer: records [op][clock advance][length, 2 bytes][request].
void CoordinatorSeeds(const fs::path& dir) {
  const auto record = [](uint8_t op, uint8_t advance, const google::protobuf::Message& m) {
    const std::string bytes = m.SerializeAsString();
    std::string out{static_cast<char>(op), static_cast<char>(advance),
                    static_cast<char>(bytes.size() & 0xff), static_cast<char>(bytes.size() >> 8)};
    return out + bytes;
  };
  // Worker wI's first join.
  const auto join_request = [](int i) {
    v1::JoinRequest join;
    join.set_protocol_version(v1::PROTOCOL_VERSION_1);
    join.set_worker_id("w" + std::to_string(i));
    join.set_peer_address("10.0.0." + std::to_string(i + 1) + ":7500");
    join.set_incarnation(1000 + i);
    return join;
  };
  std::string ring;
  for (int i = 0; i < 3; ++i) {
    v1::JoinRequest join = join_request(i);
    join.set_http_address("10.0.0." + std::to_string(i + 1) + ":9400");
    v1::RingSetting* segment = join.add_ring_settings();
    segment->set_flag("--segment_bytes");
    segment->set_value(i == 2 ? "65536" : "1048576");  // the third is refused
    ring += record(0, 1, join);
  }
  v1::WatchRingRequest watch;
  watch.set_worker_id("w0");
  watch.set_session_token(0);
  ring += record(3, 0, watch);
  v1::HeartbeatRequest heartbeat;
  heartbeat.set_worker_id("w1");
  heartbeat.set_session_token(1);
  heartbeat.set_generation(1);
  heartbeat.set_ready(true);
  heartbeat.set_last_error("collective #3 failed: rank 2 left");
  ring += record(1, 10, heartbeat);
  Write(dir, "three-workers-form-a-ring", ring);
  v1::LeaveRequest leave;
  leave.set_worker_id("w2");
  leave.set_session_token(2);
  leave.set_reason("training finished");
  Write(dir, "ring-then-leave", ring + record(2, 1, leave));
  Write(dir, "ring-then-expiry", ring + record(5, 100, v1::LeaveRequest()));
  // A restarted coordinator: every member rejoins reporting the ring of generation 5.
  v1::RingView reported;
  reported.set_generation(5);
  for (int i = 0; i < 3; ++i) {
    const v1::JoinRequest join = join_request(i);
    v1::RingMember* m = reported.add_members();
    m->set_rank(i);
    m->set_worker_id(join.worker_id());
    m->set_peer_address(join.peer_address());
    m->set_incarnation(join.incarnation());
  }
  std::string adopted;
  for (int i = 0; i < 3; ++i) {
    v1::JoinRequest join = join_request(i);
    join.set_last_generation(5);
    *join.mutable_current_view() = reported;
    adopted += record(0, 1, join);
  }
  Write(dir, "members-rejoin-and-the-ring-is-adopted", adopted);
  // A member restarts: a new incarnation of w1 once its old session went quiet.
  v1::JoinRequest restarted = join_request(1);
  restarted.set_incarnation(2001);
  Write(dir, "a-member-restarts-with-a-new-incarnation", ring + record(0, 30, restarted));
}

}  // namespace
}  // namespace ringsync

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s CORPUS_DIR   (e.g. fuzz/corpus)\n", argv[0]);
    return 2;
  }
  const std::filesystem::path root = argv[1];
  ringsync::FrameSeeds(root / "frame_decoder_fuzzer");
  ringsync::RequestSeeds(root / "worker_request_fuzzer");
  ringsync::CoordinatorSeeds(root / "coordinator_request_fuzzer");
  return 0;
}
