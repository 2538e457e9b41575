// ringsync-model-bench: one training step's gradient all-reduce for a real model's
// parameter tensors (bench/models/*.shapes: ResNet-50, BERT-base), through the SDK.
// One process per rank, each with --worker naming its own worker:
//
//   ringsync-model-bench --worker=unix:/path/w0.sock --shapes=bench/models/resnet50.shapes
//
// Each step all-reduces (SUM, float32) every tensor, in reverse declaration order (the
// order backpropagation produces gradients), in each of these modes, interleaved step by
// step so that the machine's state is shared fairly:
//   fused   one AllReduceAsync per tensor with async fusion on (ClientOptions::fusion),
//           then Wait on every handle — what a training loop does;
//   grouped one Client::AllReduceGroup of every tensor;
//   single  one AllReduce of a buffer as large as all tensors together (the bound fusion
//           is measured against).
// A step's time is the MAX over ranks (all-reduced through ringsync); a Barrier, not
// timed, starts each step. Printed: per mode the median and min over --steps, and the
// ratio of fused and grouped to single. Before timing, one step per mode is checked
// element by element against the exact sum (small-integer inputs).
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "daemon/process/help_filter.h"
#include "ringsync/client.h"

ABSL_FLAG(std::string, worker, "", "this rank's worker: unix:/path or /path (required)");
ABSL_FLAG(std::string, shapes, "", "the model's shapes file: one 'name d0xd1x...' a line");
ABSL_FLAG(int, steps, 10, "timed steps per mode");
ABSL_FLAG(int, warmup_steps, 2, "untimed steps per mode first");
ABSL_FLAG(std::string, modes, "fused,grouped,single", "which modes, in this order each step");
ABSL_FLAG(int64_t, fusion_threshold_bytes, int64_t{64} << 20, "ClientOptions::fusion.threshold_bytes");
ABSL_FLAG(absl::Duration, fusion_cycle_time, absl::Milliseconds(5), "ClientOptions::fusion.cycle_time");
ABSL_FLAG(absl::Duration, connect_timeout, absl::Seconds(60), "wait for the worker and a formed ring");

namespace ringsync {
namespace {

struct Tensor {
  std::string name;
  std::vector<float> data;
};

absl::StatusOr<std::vector<Tensor>> ReadShapes(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read --shapes=", path));
  std::vector<Tensor> tensors;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::vector<std::string> fields = absl::StrSplit(line, ' ', absl::SkipEmpty());
    size_t count = 1;
    for (absl::string_view dim : absl::StrSplit(fields.size() == 2 ? fields[1] : "", 'x')) {
      size_t d = 0;
      if (fields.size() != 2 || !absl::SimpleAtoi(dim, &d)) {
        return absl::InvalidArgumentError(absl::StrCat(path, ": bad line '", line, "'"));
      }
      count *= d;
    }
    tensors.push_back({fields[0], std::vector<float>(count)});
  }
  if (tensors.empty()) return absl::InvalidArgumentError(absl::StrCat(path, ": no tensors"));
  std::reverse(tensors.begin(), tensors.end());  // gradients arrive last layer first
  return tensors;
}

// Rank r's element i of tensor k: a small integer, so every sum is exact.
float Input(int rank, size_t k, size_t i) { return static_cast<float>((i + k + 3 * rank) % 5) - 2; }

float Expected(int n, size_t k, size_t i) {
  float sum = 0;
  for (int r = 0; r < n; ++r) sum += Input(r, k, i);
  return sum;
}

class Step {
 public:
  Step(Client& client, std::vector<Tensor>& tensors, std::vector<float>& flat)
      : client_(client), tensors_(tensors), flat_(flat) {}

  absl::Status Run(const std::string& mode) {
    if (mode == "fused") {
      std::vector<CollectiveHandle> handles;
      handles.reserve(tensors_.size());
      for (Tensor& t : tensors_) {
        handles.push_back(client_.AllReduceAsync(t.name, absl::MakeSpan(t.data), ReduceOp::kSum));
      }
      absl::Status status;
      for (CollectiveHandle& h : handles) status.Update(h.Wait());
      return status;
    }
    if (mode == "grouped") {
      std::vector<GroupTensor> group;
      group.reserve(tensors_.size());
      for (Tensor& t : tensors_) group.push_back(GroupTensor::Of(t.name, absl::MakeSpan(t.data)));
      return client_.AllReduceGroup(group, ReduceOp::kSum);
    }
    if (mode == "single") return client_.AllReduce("all_parameters", absl::MakeSpan(flat_), ReduceOp::kSum);
    return absl::InvalidArgumentError(absl::StrCat("unknown mode '", mode, "'"));
  }

  void Fill(int rank) {
    size_t at = 0;
    for (size_t k = 0; k < tensors_.size(); ++k) {
      for (size_t i = 0; i < tensors_[k].data.size(); ++i) {
        tensors_[k].data[i] = flat_[at++] = Input(rank, k, i);
      }
    }
  }

  // Wrong elements: the tensors, or for "single" the flat buffer, against the exact sums.
  int64_t Wrong(const std::string& mode, int n) const {
    int64_t wrong = 0;
    size_t at = 0;
    for (size_t k = 0; k < tensors_.size(); ++k) {
      for (size_t i = 0; i < tensors_[k].data.size(); ++i, ++at) {
        const float got = mode == "single" ? flat_[at] : tensors_[k].data[i];
        wrong += got != Expected(n, k, i);
      }
    }
    return wrong;
  }

 private:
  Client& client_;
  std::vector<Tensor>& tensors_;
  std::vector<float>& flat_;
};

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

int Run() {
  absl::StatusOr<std::vector<Tensor>> tensors = ReadShapes(absl::GetFlag(FLAGS_shapes));
  if (!tensors.ok()) {
    std::fprintf(stderr, "ringsync-model-bench: %s\n", tensors.status().ToString().c_str());
    return 2;
  }
  size_t total = 0;
  for (const Tensor& t : *tensors) total += t.data.size();
  std::vector<float> flat(total);
  const std::vector<std::string> modes = absl::StrSplit(absl::GetFlag(FLAGS_modes), ',');

  ClientOptions options;
  options.connect_timeout = absl::GetFlag(FLAGS_connect_timeout);
  options.fusion.enabled = true;
  options.fusion.threshold_bytes = absl::GetFlag(FLAGS_fusion_threshold_bytes);
  options.fusion.cycle_time = absl::GetFlag(FLAGS_fusion_cycle_time);
  absl::StatusOr<std::unique_ptr<Client>> connected = Client::Connect(absl::GetFlag(FLAGS_worker), options);
  if (!connected.ok()) {
    std::fprintf(stderr, "ringsync-model-bench: %s\n", connected.status().ToString().c_str());
    return 1;
  }
  Client& client = **connected;
  const int rank = client.rank(), n = client.world_size();
  Step step(client, *tensors, flat);
  auto fail = [&](const absl::Status& s) {
    std::fprintf(stderr, "ringsync-model-bench rank %d: %s\n", rank, s.ToString().c_str());
    return 1;
  };

  // Check every mode once on fresh inputs.
  std::vector<int64_t> wrong(modes.size());
  for (size_t m = 0; m < modes.size(); ++m) {
    step.Fill(rank);
    if (absl::Status s = step.Run(modes[m]); !s.ok()) return fail(s);
    wrong[m] = step.Wrong(modes[m], n);
  }
  if (absl::Status s = client.AllReduce("wrong", absl::MakeSpan(wrong), ReduceOp::kSum); !s.ok()) {
    return fail(s);
  }

  const int steps = absl::GetFlag(FLAGS_steps), warmups = absl::GetFlag(FLAGS_warmup_steps);
  std::vector<double> seconds(modes.size() * steps);  // [mode][step]
  for (int s = -warmups; s < steps; ++s) {
    for (size_t m = 0; m < modes.size(); ++m) {
      if (absl::Status b = client.Barrier("step"); !b.ok()) return fail(b);
      const absl::Time start = absl::Now();
      if (absl::Status r = step.Run(modes[m]); !r.ok()) return fail(r);
      if (s >= 0) seconds[m * steps + s] = absl::ToDoubleSeconds(absl::Now() - start);
    }
  }
  if (absl::Status s = client.AllReduce("seconds", absl::MakeSpan(seconds), ReduceOp::kMax); !s.ok()) {
    return fail(s);
  }
  int64_t all_wrong = 0;
  for (int64_t w : wrong) all_wrong += w;
  if (rank == 0) {
    std::printf("# ringsync-model-bench: %s, %zu tensors, %zu float32 (%.1f MiB), N=%d, fusion "
                "threshold %lld B, cycle %s; step time = max over ranks, %d steps per mode\n",
                absl::GetFlag(FLAGS_shapes).c_str(), tensors->size(), total,
                total * 4.0 / (1 << 20), n, static_cast<long long>(absl::GetFlag(FLAGS_fusion_threshold_bytes)),
                absl::FormatDuration(absl::GetFlag(FLAGS_fusion_cycle_time)).c_str(), steps);
    double single = 0;
    for (size_t m = 0; m < modes.size(); ++m) {
      if (modes[m] == "single") single = Median({seconds.begin() + m * steps, seconds.begin() + (m + 1) * steps});
    }
    for (size_t m = 0; m < modes.size(); ++m) {
      std::vector<double> v(seconds.begin() + m * steps, seconds.begin() + (m + 1) * steps);
      const double median = Median(v);
      std::printf("ringsync %-8s median_ms %9.2f  min_ms %9.2f  vs_single %5.3f  wrong %lld\n",
                  modes[m].c_str(), median * 1e3, *std::min_element(v.begin(), v.end()) * 1e3,
                  single > 0 ? median / single : 0.0, static_cast<long long>(wrong[m]));
    }
  }
  return all_wrong == 0 ? 0 : 1;
}

}  // namespace
}  // namespace ringsync

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "a model's gradient all-reduce per step through ringsync (fused async calls, one grouped "
      "call, one flat all-reduce); one process per rank:\n  ringsync-model-bench "
      "--worker=unix:/path/w0.sock --shapes=bench/models/resnet50.shapes");
  absl::SetFlagsUsageConfig(ringsync::HelpListingFlagsFrom("bench/model_bench.cc"));
  absl::ParseCommandLine(argc, argv);
  return ringsync::Run();
}
