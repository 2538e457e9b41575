// Test helper: run N ranks as threads, in the style of Gloo's spawn(n, fn).
#pragma once

#include <functional>
#include <thread>
#include <vector>

#include "absl/status/status.h"

namespace ringsync {

// Runs fn(rank) for every rank on its own thread and returns each rank's status.
inline std::vector<absl::Status> SpawnRanks(int world_size,
                                            const std::function<absl::Status(int)>& fn) {
  std::vector<absl::Status> results(static_cast<size_t>(world_size));
  {
    std::vector<std::jthread> threads;
    for (int r = 0; r < world_size; ++r) {
      threads.emplace_back([&, r] { results[static_cast<size_t>(r)] = fn(r); });
    }
  }
  return results;
}

}  // namespace ringsync
