// FakeWorker: a tiny in-process stand-in for `ringsyncd worker`, for the SDK's tests.
//
// It serves the Worker service on a unix socket in a fresh temporary directory and on
// 127.0.0.1:<free port>, records every collective request (without its data), and
// "computes" in a way a test can predict:
//   AllReduce  doubles every element (float16/bfloat16: adds 1 to the uint16 storage);
//   Broadcast  leaves the root's buffer alone, sets every byte of others' to 0x40 + root;
//   AllGather  returns world_size copies of the input;
//   AllToAll   returns the input's world_size blocks in reverse order, in place;
//   Barrier    returns at once.
// Shared-memory requests are served in place, as the real worker does.
#pragma once

#include <fcntl.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "core/outcome.h"
#include "core/sync/steady_deadline.h"
#include "ringsync/dtype.h"
#include "wire/grpc_options.h"
#include "grpcpp/grpcpp.h"
#include "ringsync/v1/worker.grpc.pb.h"
#include "wire/protocol_version.h"

namespace ringsync::testing {

// One collective request as the fake received it, its data replaced by a summary.
struct SeenRequest {
  std::string method;             // "AllReduce", "Broadcast", "AllGather", "Barrier"
  v1::CollectiveRequest request;  // inline_data cleared (see inline_bytes); shared kept
  bool was_inline = false;
  size_t inline_bytes = 0;
  bool shared_file_existed = false;
};

// FakeRing: the in-process meeting point of N FakeWorkers that really combine their
// clients' data, so that several SDK clients (e.g. the example trainer's processes) can
// run as if a ring existed. It supports what those need: float32/float64 all-reduce with
// SUM or AVG (summed in rank order, so every rank gets the same bytes), all-gather,
// broadcast and barrier; collectives meet by client_sequence.
class FakeRing {
 public:
  // Faults a test can plant, to see that the example trainer's verdict notices them.
  enum class Fault {
    kNone,
    kSumForAvg,        // AVG all-reduces return the sum
    kPerturbLastRank,  // the last rank's all-reduce results are off by one ulp
  };

  explicit FakeRing(int world_size, Fault fault = Fault::kNone)
      : world_size_(world_size), fault_(fault) {}
  int world_size() const { return world_size_; }

  // Blocks until every rank has contributed collective `request.client_sequence()`, then
  // replaces `data` with the result.
  grpc::Status Collect(int rank, const std::string& method, const v1::CollectiveRequest& request,
                       std::string& data) {
    absl::MutexLock lock(&mu_);
    Round& round = rounds_[request.client_sequence()];
    if (round.inputs.empty()) round.inputs.resize(world_size_);
    round.inputs[rank] = data;
    if (++round.arrived == world_size_) {
      round.result = Combine(method, request, round.inputs, fault_ == Fault::kSumForAvg);
    }
    auto complete = [&round] { return round.result.has_value(); };
    if (!mu_.AwaitWithTimeout(absl::Condition(&complete), absl::Seconds(30))) {
      return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "fake ring: a rank never came");
    }
    const absl::StatusOr<std::string> result = *round.result;
    if (++round.departed == world_size_) rounds_.erase(request.client_sequence());
    if (!result.ok()) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          std::string(result.status().message()));
    }
    data = *result;
    if (fault_ == Fault::kPerturbLastRank && rank == world_size_ - 1 && method == "AllReduce" &&
        request.spec().dtype() == v1::DTYPE_FLOAT64 && data.size() >= sizeof(double)) {
      data[0] ^= 1;  // the lowest mantissa bit of the first element
    }
    return grpc::Status::OK;
  }

 private:
  struct Round {
    std::vector<std::string> inputs;
    int arrived = 0;
    int departed = 0;
    std::optional<absl::StatusOr<std::string>> result;
  };

  template <typename T>
  static std::string Reduce(const std::vector<std::string>& inputs, bool average) {
    std::string out = inputs[0];
    const size_t n = out.size() / sizeof(T);
    for (size_t i = 0; i < n; ++i) {
      T sum;
      std::memcpy(&sum, inputs[0].data() + i * sizeof(T), sizeof(T));
      for (size_t r = 1; r < inputs.size(); ++r) {
        T v;
        std::memcpy(&v, inputs[r].data() + i * sizeof(T), sizeof(T));
        sum += v;
      }
      if (average) sum /= static_cast<T>(inputs.size());
      std::memcpy(out.data() + i * sizeof(T), &sum, sizeof(T));
    }
    return out;
  }

  // int64 MAX or MIN, for ElasticState::Sync.
  static std::string Extreme(const std::vector<std::string>& inputs, bool max) {
    std::string out = inputs[0];
    for (size_t i = 0; i < out.size() / sizeof(int64_t); ++i) {
      int64_t best;
      std::memcpy(&best, inputs[0].data() + i * sizeof(int64_t), sizeof(int64_t));
      for (const std::string& input : inputs) {
        int64_t v;
        std::memcpy(&v, input.data() + i * sizeof(int64_t), sizeof(int64_t));
        best = max ? std::max(best, v) : std::min(best, v);
      }
      std::memcpy(out.data() + i * sizeof(int64_t), &best, sizeof(int64_t));
    }
    return out;
  }

  static absl::StatusOr<std::string> Combine(const std::string& method,
                                             const v1::CollectiveRequest& request,
                                             const std::vector<std::string>& inputs,
                                             bool sum_for_avg) {
    if (method == "AllGather") {
      std::string all;
      for (const std::string& input : inputs) all += input;
      return all;
    }
    if (method == "Broadcast") return inputs[request.spec().root()];
    if (method == "Barrier") return std::string();
    if ((request.spec().op() == v1::REDUCE_OP_MAX || request.spec().op() == v1::REDUCE_OP_MIN) &&
        request.spec().dtype() == v1::DTYPE_INT64) {
      return Extreme(inputs, request.spec().op() == v1::REDUCE_OP_MAX);
    }
    if (request.spec().op() != v1::REDUCE_OP_SUM && request.spec().op() != v1::REDUCE_OP_AVG) {
      return absl::UnimplementedError("fake ring: only sum and avg (and int64 max, min)");
    }
    const bool average = request.spec().op() == v1::REDUCE_OP_AVG && !sum_for_avg;
    if (request.spec().dtype() == v1::DTYPE_FLOAT64) return Reduce<double>(inputs, average);
    if (request.spec().dtype() == v1::DTYPE_FLOAT32) return Reduce<float>(inputs, average);
    return absl::UnimplementedError("fake ring: only float32 and float64");
  }

  const int world_size_;
  const Fault fault_;
  absl::Mutex mu_;
  std::map<uint64_t, Round> rounds_ ABSL_GUARDED_BY(mu_);  // std::map: references stay valid
};

class FakeWorker final : public v1::Worker::Service {
 public:
  FakeWorker() {
    info_.set_worker_id("fake-w0");
    info_.set_rank(0);
    info_.set_world_size(2);
    info_.set_generation(1);
    info_.set_ready(true);
    info_.set_reduce_device("cpu");
    info_.set_protocol_version(kProtocolVersion);
  }

  ~FakeWorker() override {
    if (server_ != nullptr) {
      server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
      server_->Wait();
    }
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }

  void Start() {
    char dir[] = "/tmp/ringsync-client-test-XXXXXX";
    dir_ = mkdtemp(dir);
    socket_path_ = dir_ + "/worker.sock";
    grpc::ServerBuilder builder;
    ConfigureServerBuilder(builder, 64 << 20);
    builder.AddListeningPort("unix:" + socket_path_, grpc::InsecureServerCredentials());
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &tcp_port_);
    builder.RegisterService(this);
    server_ = builder.BuildAndStart();
  }

  std::string unix_target() const { return "unix:" + socket_path_; }
  const std::string& socket_path() const { return socket_path_; }
  std::string tcp_target() const { return absl::StrCat("127.0.0.1:", tcp_port_); }

  // Replaces the worker's report; an attached client receives it as a WorkerEvent.
  void SetInfo(const v1::WorkerInfo& info) {
    absl::MutexLock lock(&mu_);
    info_ = info;
    ++info_version_;
  }
  v1::WorkerInfo info() {
    absl::MutexLock lock(&mu_);
    return info_;
  }
  // Ends the attached client's stream with `status`.
  void EndAttach(grpc::Status status) {
    absl::MutexLock lock(&mu_);
    end_attach_ = std::move(status);
  }
  bool attached() {
    absl::MutexLock lock(&mu_);
    return attached_;
  }
  std::string attached_client_name() {
    absl::MutexLock lock(&mu_);
    return client_name_;
  }

  // Collectives named `name` fail with `status`, after scribbling 0xFF over any shared
  // region (so a test sees whether the SDK copied anything back).
  // `as_channel`: the status is not marked as the worker's verdict, as when the channel to
  // the worker broke ("Socket closed").
  void FailCollective(const std::string& name, grpc::Status status, bool as_channel = false) {
    absl::MutexLock lock(&mu_);
    failures_[name] = std::move(status);
    if (as_channel) channel_failures_.insert(name);
  }
  // The next collective named `name` fails as the worker fails one that a change of the
  // ring's membership interrupted: ABORTED, marked membership changed, naming the new
  // membership `membership` (core/outcome.h's trailers). Later ones run.
  void FailNextForMembershipChange(const std::string& name, uint64_t membership) {
    absl::MutexLock lock(&mu_);
    membership_failures_[name] = membership;
  }
  // Failures of collectives named `name` carry `mark` (core/outcome.h) in the
  // "ringsync-outcome" trailer, as the worker sends it.
  void MarkOutcome(const std::string& name, OutcomeMark mark) {
    absl::MutexLock lock(&mu_);
    outcome_marks_[name] = mark;
  }
  // Collectives named `name` take at least `delay` (less when cancelled).
  void DelayCollective(const std::string& name, absl::Duration delay) {
    absl::MutexLock lock(&mu_);
    delays_[name] = delay;
  }
  // Collectives named `name` answer with one byte too few of inline result.
  void TruncateResponse(const std::string& name) {
    absl::MutexLock lock(&mu_);
    truncated_.push_back(name);
  }
  // Reduce-scatters run as if the ring had `world_size` ranks (it changed size since the
  // client last heard); 0: the ring of info().
  void RunReduceScattersOnARingOf(int world_size) {
    absl::MutexLock lock(&mu_);
    reduce_scatter_world_ = world_size;
  }

  std::vector<SeenRequest> seen() {
    absl::MutexLock lock(&mu_);
    return seen_;
  }

  // --- Worker service ---

  grpc::Status GetInfo(grpc::ServerContext*, const v1::GetInfoRequest*,
                       v1::WorkerInfo* response) override {
    *response = info();
    return grpc::Status::OK;
  }

  grpc::Status Attach(grpc::ServerContext* context, const v1::AttachRequest* request,
                      grpc::ServerWriter<v1::WorkerEvent>* writer) override {
    {
      absl::MutexLock lock(&mu_);
      if (attached_) {
        return grpc::Status(
            grpc::StatusCode::FAILED_PRECONDITION,
            absl::StrCat("worker fake-w0 already serves client '", client_name_, "'"));
      }
      attached_ = true;
      client_name_ = request->client_name();
      end_attach_.reset();
    }
    uint64_t sent_version = 0;
    grpc::Status result = grpc::Status::OK;
    while (true) {
      v1::WorkerEvent event;
      {
        absl::MutexLock lock(&mu_);
        auto changed = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
          return end_attach_.has_value() || info_version_ != sent_version;
        };
        mu_.AwaitWithTimeout(absl::Condition(&changed), absl::Milliseconds(10));
        if (end_attach_.has_value()) {
          result = *end_attach_;
          break;
        }
        if (context->IsCancelled()) {
          result = grpc::Status::CANCELLED;
          break;
        }
        if (info_version_ == sent_version) continue;
        *event.mutable_info() = info_;
        sent_version = info_version_;
      }
      if (!writer->Write(event)) break;
    }
    absl::MutexLock lock(&mu_);
    attached_ = false;
    return result;
  }

  grpc::Status AllReduce(grpc::ServerContext* context, const v1::CollectiveRequest* request,
                         v1::CollectiveResponse* response) override {
    return Serve("AllReduce", context, request, response, [&](std::string& data) {
      if (ring_ != nullptr) return ring_->Collect(rank_, "AllReduce", *request, data);
      Double(request->spec().dtype(), data);
      return grpc::Status::OK;
    });
  }

  grpc::Status Broadcast(grpc::ServerContext* context, const v1::CollectiveRequest* request,
                         v1::CollectiveResponse* response) override {
    const int rank = info().rank();
    return Serve("Broadcast", context, request, response, [&](std::string& data) {
      if (ring_ != nullptr) return ring_->Collect(rank_, "Broadcast", *request, data);
      if (request->spec().root() != rank)
        data.assign(data.size(), static_cast<char>(0x40 + request->spec().root()));
      return grpc::Status::OK;
    });
  }

  grpc::Status AllGather(grpc::ServerContext* context, const v1::CollectiveRequest* request,
                         v1::CollectiveResponse* response) override {
    const int world = info().world_size();
    return Serve("AllGather", context, request, response, [&](std::string& data) {
      if (ring_ != nullptr) return ring_->Collect(rank_, "AllGather", *request, data);
      std::string gathered;
      for (int r = 0; r < world; ++r) gathered += data;
      data = std::move(gathered);
      return grpc::Status::OK;
    });
  }

  // Stand-in: the rank's block of its own input, as the worker answers (inline: only the
  // block, with its size).
  grpc::Status ReduceScatter(grpc::ServerContext* context, const v1::CollectiveRequest* request,
                             v1::CollectiveResponse* response) override {
    const int rank = info().rank();
    int world = info().world_size();
    {
      absl::MutexLock lock(&mu_);
      if (reduce_scatter_world_ > 0) world = reduce_scatter_world_;
    }
    return Serve("ReduceScatter", context, request, response, [&](std::string& data) {
      const size_t block = data.size() / static_cast<size_t>(world);
      data = data.substr(static_cast<size_t>(rank) * block, block);
      response->set_result_bytes(block);
      return grpc::Status::OK;
    });
  }

  // Stand-in: the rank's block of the root's data — the root's own input at the root,
  // elsewhere bytes of 0x40 + root — as the worker answers (inline: only the block).
  grpc::Status Scatter(grpc::ServerContext* context, const v1::CollectiveRequest* request,
                       v1::CollectiveResponse* response) override {
    const int rank = info().rank();
    const int world = info().world_size();
    const int root = request->spec().root();
    const size_t bytes = request->spec().count() *
                         DTypeSize(static_cast<DType>(request->spec().dtype()));
    return Serve("Scatter", context, request, response, [&](std::string& data) {
      if (root != rank) data.assign(bytes, static_cast<char>(0x40 + root));
      const size_t block = bytes / static_cast<size_t>(world);
      response->set_result_bytes(block);
      if (request->has_shared()) {  // the block stays where it lies in the region
        response->set_result_offset(static_cast<size_t>(rank) * block);
      } else {
        data = data.substr(static_cast<size_t>(rank) * block, block);
      }
      return grpc::Status::OK;
    });
  }

  // Stand-in: at the root every rank's input is taken to be its own (its input in every
  // slot), with the result's size; elsewhere no result (result_bytes 0), as the worker
  // answers.
  grpc::Status Gather(grpc::ServerContext* context, const v1::CollectiveRequest* request,
                      v1::CollectiveResponse* response) override {
    const int world = info().world_size();
    const bool root = request->spec().root() == info().rank();
    const size_t bytes = request->spec().count() *
                         DTypeSize(static_cast<DType>(request->spec().dtype()));
    return Serve("Gather", context, request, response, [&](std::string& data) {
      if (!root) {
        // Inline: nothing comes back; in a region: the region as the ring left it.
        data.resize(request->has_shared() ? bytes * static_cast<size_t>(world) : 0);
        response->set_result_bytes(0);
        return grpc::Status::OK;
      }
      const std::string mine = data.substr(0, bytes);
      data.clear();
      for (int r = 0; r < world; ++r) data += mine;
      response->set_result_bytes(data.size());
      return grpc::Status::OK;
    });
  }

  grpc::Status AllToAll(grpc::ServerContext* context, const v1::CollectiveRequest* request,
                        v1::CollectiveResponse* response) override {
    const size_t world = static_cast<size_t>(info().world_size());
    return Serve("AllToAll", context, request, response, [&](std::string& data) {
      const size_t block = data.size() / world;
      std::string reversed;
      for (size_t q = world; q-- > 0;) reversed += data.substr(q * block, block);
      data = std::move(reversed);
      return grpc::Status::OK;
    });
  }

  grpc::Status Barrier(grpc::ServerContext* context, const v1::CollectiveRequest* request,
                       v1::CollectiveResponse* response) override {
    return Serve("Barrier", context, request, response, [&](std::string& data) {
      if (ring_ != nullptr) return ring_->Collect(rank_, "Barrier", *request, data);
      return grpc::Status::OK;
    });
  }

  // Makes this worker rank `rank` of `ring`: its collectives then really combine with the
  // other members' instead of using the predictable stand-ins above. Call before Start.
  void JoinRing(FakeRing* ring, int rank) {
    ring_ = ring;
    rank_ = rank;
    v1::WorkerInfo joined = info();
    joined.set_worker_id(absl::StrCat("fake-w", rank));
    joined.set_rank(rank);
    joined.set_world_size(ring->world_size());
    SetInfo(joined);
  }

 private:
  static void Double(v1::DType dtype, std::string& data) {
    auto each = [&data]<typename T>(auto op) {
      for (size_t i = 0; i + sizeof(T) <= data.size(); i += sizeof(T)) {
        T value;
        std::memcpy(&value, data.data() + i, sizeof(T));
        value = op(value);
        std::memcpy(data.data() + i, &value, sizeof(T));
      }
    };
    auto twice = [](auto v) { return static_cast<decltype(v)>(v * 2); };
    switch (dtype) {
      case v1::DTYPE_FLOAT32:
        each.operator()<float>(twice);
        break;
      case v1::DTYPE_FLOAT64:
        each.operator()<double>(twice);
        break;
      case v1::DTYPE_INT32:
        each.operator()<int32_t>(twice);
        break;
      case v1::DTYPE_INT64:
        each.operator()<int64_t>(twice);
        break;
      case v1::DTYPE_INT8:
        each.operator()<int8_t>(twice);
        break;
      case v1::DTYPE_UINT8:
        each.operator()<uint8_t>(twice);
        break;
      default:
        each.operator()<uint16_t>([](uint16_t v) { return static_cast<uint16_t>(v + 1); });
    }
  }

  grpc::Status Serve(const std::string& method, grpc::ServerContext* context,
                     const v1::CollectiveRequest* request, v1::CollectiveResponse* response,
                     const std::function<grpc::Status(std::string&)>& compute) {
    SeenRequest seen{method, *request, request->has_inline_data(), request->inline_data().size()};
    seen.request.clear_inline_data();
    if (request->has_shared()) {
      seen.shared_file_existed = std::filesystem::exists(request->shared().path());
    }
    bool marked = true;
    std::optional<grpc::Status> failure;
    absl::Duration delay;
    bool truncate = false;
    {
      absl::MutexLock lock(&mu_);
      seen_.push_back(seen);
      if (auto it = failures_.find(request->spec().name()); it != failures_.end()) failure = it->second;
      if (auto it = membership_failures_.find(request->spec().name());
          it != membership_failures_.end()) {
        failure = grpc::Status(grpc::StatusCode::ABORTED,
                               "rank 0 (generation 3, collective 'x'): the ring's membership "
                               "changed: generation 3 (2 workers) -> generation 5 (1 workers)");
        context->AddTrailingMetadata("ringsync-outcome", "membership_changed");
        context->AddTrailingMetadata("ringsync-membership", absl::StrCat(it->second));
        membership_failures_.erase(it);
      }
      marked = !channel_failures_.contains(request->spec().name());
      if (auto it = outcome_marks_.find(request->spec().name());
          it != outcome_marks_.end() && failure.has_value() && marked) {
        context->AddTrailingMetadata(std::string(kOutcomeMetadataKey),
                                     std::string(OutcomeMarkName(it->second)));
      }
      if (auto it = delays_.find(request->spec().name()); it != delays_.end()) delay = it->second;
      for (const std::string& name : truncated_) truncate |= name == request->spec().name();
    }
    if ((failure.has_value() && marked) || !request->refused_by_client().empty()) {
      // As the worker marks its own verdicts (worker.proto).
      context->AddTrailingMetadata("ringsync-status-origin", "worker");
    }
    if (!request->refused_by_client().empty()) {
      // As the worker does: the refusal only takes its turn, and fails.
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, request->refused_by_client());
    }
    for (const SteadyDeadline until(delay); !until.Passed();) {
      if (context->IsCancelled()) return grpc::Status::CANCELLED;
      absl::SleepFor(absl::Milliseconds(2));
    }
    response->set_generation(info().generation());
    response->set_sequence(request->client_sequence());
    const size_t input_bytes = request->spec().count() * DTypeSize(static_cast<DType>(request->spec().dtype()));
    if (request->has_shared()) {
      return ServeShared(request->shared(), input_bytes, failure, compute);
    }
    if (failure.has_value()) return *failure;
    std::string data = request->inline_data();
    if (grpc::Status status = compute(data); !status.ok()) return status;
    if (truncate && !data.empty()) data.pop_back();
    response->set_inline_data(std::move(data));
    return grpc::Status::OK;
  }

  // As the real worker: only ringsync- files under /dev/shm, mapped read-write.
  static grpc::Status ServeShared(const v1::SharedTensor& shared, size_t input_bytes,
                                  const std::optional<grpc::Status>& failure,
                                  const std::function<grpc::Status(std::string&)>& compute) {
    if (!absl::StartsWith(shared.path(), "/dev/shm/ringsync-")) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "shared path outside /dev/shm");
    }
    const int fd = open(shared.path().c_str(), O_RDWR | O_CLOEXEC);
    if (fd < 0) return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "cannot open shared file");
    struct stat st {};
    fstat(fd, &st);
    if (static_cast<uint64_t>(st.st_size) < shared.offset() + shared.size_bytes() ||
        input_bytes > shared.size_bytes() || shared.size_bytes() == 0) {
      close(fd);
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "shared region has the wrong size");
    }
    void* map = mmap(nullptr, shared.offset() + shared.size_bytes(), PROT_READ | PROT_WRITE,
                     MAP_SHARED, fd, 0);
    close(fd);
    if (map == MAP_FAILED) return grpc::Status(grpc::StatusCode::INTERNAL, "mmap failed");
    char* region = static_cast<char*>(map) + shared.offset();
    grpc::Status status = grpc::Status::OK;
    if (failure.has_value()) {
      std::memset(region, 0xFF, shared.size_bytes());
      status = *failure;
    } else {
      std::string data(region, input_bytes);
      status = compute(data);
      if (status.ok() && data.size() != shared.size_bytes()) {
        status = grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "result does not fit the region");
      }
      if (status.ok()) std::memcpy(region, data.data(), data.size());
    }
    munmap(map, shared.offset() + shared.size_bytes());
    return status;
  }

  FakeRing* ring_ = nullptr;
  int rank_ = 0;
  std::string dir_;
  std::string socket_path_;
  int tcp_port_ = 0;
  std::unique_ptr<grpc::Server> server_;

  absl::Mutex mu_;
  v1::WorkerInfo info_ ABSL_GUARDED_BY(mu_);
  uint64_t info_version_ ABSL_GUARDED_BY(mu_) = 1;
  bool attached_ ABSL_GUARDED_BY(mu_) = false;
  std::string client_name_ ABSL_GUARDED_BY(mu_);
  std::optional<grpc::Status> end_attach_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, grpc::Status> failures_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<std::string> channel_failures_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, uint64_t> membership_failures_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, OutcomeMark> outcome_marks_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, absl::Duration> delays_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> truncated_ ABSL_GUARDED_BY(mu_);
  int reduce_scatter_world_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<SeenRequest> seen_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ringsync::testing
