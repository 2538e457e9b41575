// What a collective is, as every rank must agree on it before any byte is combined.
//
// Ranks exchange their CollectiveSpec with the first frame of every collective; a
// disagreement fails the collective on every rank with both sides quoted, e.g.
//   collective #17 'grad/fc1': rank 2 has allreduce 1024 x float32 sum,
//   rank 1 has allreduce 1000 x float32 sum
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "core/dtype.h"

namespace ringsync {

// Values are part of the wire contract: never renumber.
enum class CollectiveKind : uint8_t {
  kAllReduce = 1,
  kBroadcast = 2,
  kAllGather = 3,
  kBarrier = 4,
};

absl::string_view CollectiveKindName(CollectiveKind kind);

struct CollectiveSpec {
  CollectiveKind kind = CollectiveKind::kAllReduce;
  std::string name;       // the caller's label, e.g. "grad/fc1"
  uint64_t sequence = 0;  // position in this generation's stream of collectives
  DType dtype = DType::kFloat32;
  uint64_t count = 0;     // elements per rank
  ReduceOp op = ReduceOp::kSum;
  int root = 0;           // broadcast only
  double pre_scale = 1.0;
  double post_scale = 1.0;

  friend bool operator==(const CollectiveSpec&, const CollectiveSpec&) = default;
};

// "allreduce 1024 x float32 sum" — the part two ranks compare.
std::string DescribeShape(const CollectiveSpec& spec);

// "collective #17 'grad/fc1'".
std::string DescribeCollective(const CollectiveSpec& spec);

// OK when the specs match; else FailedPrecondition quoting both ranks' view.
absl::Status CheckAgreement(const CollectiveSpec& mine, int my_rank, const CollectiveSpec& theirs,
                            int their_rank);

}  // namespace ringsync
