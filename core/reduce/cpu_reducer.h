// CpuReducer: the reducer every worker can run, vectorized where the CPU allows.
//
// One binary runs on any x86-64: at construction the reducer picks the best kernels
// the CPU supports (AVX-512BW for bfloat16, AVX2 + F16C for the rest, else portable
// scalar loops). All produce the same bits (see core/reduce/cpu_kernels.h); the
// numerics contract is in reducer.h.
//
// Thread-safety: stateless after construction; any number of threads may call it at
// once on disjoint buffers. Buffers need no particular alignment.
#pragma once

#include <string>
#include <string_view>

#include "core/reduce/reducer.h"

namespace ringsync {

namespace cpu_kernels {
struct KernelTable;
}

class CpuReducer final : public Reducer {
 public:
  // Which kernels to use. Anything but kBest is for tests and benchmarks; a level the
  // CPU lacks falls back to the next lower one (isa() tells which ran).
  enum class Isa {
    kBest,      // the highest level below that this CPU supports
    kAvx2,      // AVX2 + F16C
    kPortable,  // scalar loops only
  };

  explicit CpuReducer(Isa isa = Isa::kBest);

  std::string name() const override { return "cpu"; }
  // The kernel set in use: "avx512", "avx2" or "portable". For logs and benchmarks.
  std::string_view isa() const;

  absl::Status Combine(const ReduceSpec& spec, void* dst, const void* src, size_t count,
                       ReduceStats* stats) override;
  absl::Status PreScale(const ReduceSpec& spec, void* buf, size_t count,
                        ReduceStats* stats) override;
  absl::Status Finalize(const ReduceSpec& spec, void* buf, size_t count,
                        ReduceStats* stats) override;

 private:
  const cpu_kernels::KernelTable* kernels_;  // static storage; never null
};

}  // namespace ringsync
