#include "core/ring/stride_copying.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/ring/direct_transfer.h"
#include "core/ring/partition.h"
#include "core/ring/ring_broadcast.h"
#include "core/ring/ring_gather.h"
#include "core/ring/ring_pipeline.h"
#include "core/ring/ring_scatter.h"
#include "core/ring/stride_allreduce.h"

namespace ringsync {
namespace {

bool IsCopying(CollectiveKind kind) {
  return kind == CollectiveKind::kBroadcast || kind == CollectiveKind::kScatter ||
         kind == CollectiveKind::kGather || kind == CollectiveKind::kAllGather ||
         kind == CollectiveKind::kAllToAll;
}

// The checks the ring's algorithm for the kind makes first.
absl::Status CheckCopySpec(const RingMember& me, const CollectiveSpec& spec, size_t buffer_bytes) {
  switch (spec.kind) {
    case CollectiveKind::kBroadcast:
      return CheckChainSpec(me, spec, buffer_bytes, spec.count, spec.kind);
    case CollectiveKind::kScatter: return CheckScatterSpec(me, spec, buffer_bytes);
    case CollectiveKind::kGather: return CheckGatherSpec(me, spec, buffer_bytes);
    case CollectiveKind::kAllGather:
      return CheckBufferSize(me, spec, buffer_bytes,
                             spec.count * static_cast<size_t>(std::max(1, me.world_size)));
    case CollectiveKind::kAllToAll: return CheckAllToAllSpec(me, spec, buffer_bytes);
    default:
      return absl::InvalidArgumentError(absl::StrCat(
          "the stride links cannot copy a ", CollectiveKindName(spec.kind)));
  }
}

// A broadcast's and a scatter's data is the root's alone.
bool OnlyTheRootContributes(CollectiveKind kind) {
  return kind == CollectiveKind::kBroadcast || kind == CollectiveKind::kScatter;
}

// What `rank` sends in the gather pass, in bytes (see the header).
uint64_t ContributionBytes(const CollectiveSpec& spec, int rank) {
  const uint64_t bytes = spec.count * DTypeSize(spec.dtype);
  return OnlyTheRootContributes(spec.kind) && rank != spec.root ? 0 : bytes;
}

// Writes this rank's result from `held` (every rank's contribution) into `buffer`.
void CopyResult(const RingMember& me, const CollectiveSpec& spec,
                const std::vector<StrideContribution>& held, absl::Span<std::byte> buffer) {
  const size_t n = static_cast<size_t>(me.world_size);
  // There the root holds its result already: its buffer is the data.
  if (OnlyTheRootContributes(spec.kind) && me.rank == spec.root) return;
  switch (spec.kind) {
    case CollectiveKind::kBroadcast: {
      const std::vector<std::byte>& data = held[static_cast<size_t>(spec.root)].bytes;
      if (!data.empty()) std::memcpy(buffer.data(), data.data(), data.size());
      return;
    }
    case CollectiveKind::kScatter: {
      const std::vector<std::byte>& data = held[static_cast<size_t>(spec.root)].bytes;
      const size_t block = data.size() / n;
      const size_t at = block * static_cast<size_t>(me.rank);
      if (block > 0) std::memcpy(buffer.data() + at, data.data() + at, block);
      return;
    }
    case CollectiveKind::kGather:
      if (me.rank != spec.root) return;
      [[fallthrough]];
    case CollectiveKind::kAllGather: {
      const size_t slot = spec.count * DTypeSize(spec.dtype);
      for (size_t r = 0; r < n && slot > 0; ++r) {
        std::memcpy(buffer.data() + r * slot, held[r].bytes.data(), slot);
      }
      return;
    }
    case CollectiveKind::kAllToAll: {
      // Rank q's block for this rank becomes block q; this rank's own stays.
      const size_t block = buffer.size() / n;
      const size_t mine = block * static_cast<size_t>(me.rank);
      for (size_t q = 0; q < n && block > 0; ++q) {
        if (q == static_cast<size_t>(me.rank)) continue;
        std::memcpy(buffer.data() + q * block, held[q].bytes.data() + mine, block);
      }
      return;
    }
    default:
      return;
  }
}

// This rank's contribution, read from its buffer before anything is written there.
std::vector<std::byte> Mine(const RingMember& me, const CollectiveSpec& spec,
                            absl::Span<const std::byte> buffer) {
  const uint64_t bytes = ContributionBytes(spec, me.rank);
  return std::vector<std::byte>(buffer.begin(), buffer.begin() + static_cast<ptrdiff_t>(bytes));
}

}  // namespace

std::optional<StrideSchedule> StrideScheduleToCopy(const CollectiveSpec& spec, int world_size,
                                                   const AlgorithmPolicy& policy) {
  // An uneven all-to-all's ranks have sizes of their own: it always runs as a direct
  // transfer (direct_transfer.h), which every rank chooses alike.
  if (!IsCopying(spec.kind) || !IsValid(spec.dtype) || HasUnevenBlocks(spec)) return std::nullopt;
  const uint64_t bytes = spec.count * DTypeSize(spec.dtype);
  return StrideScheduleOf(
      ChooseAllReduceAlgorithm(world_size, bytes, spec.dtype, ReduceOp::kSum, policy));
}

absl::Status StrideCopy(StrideSchedule schedule, const RingMember& me, StrideLinks& links,
                        const CollectiveSpec& spec, absl::Span<std::byte> buffer,
                        const RingOptions& options, RingStats* stats) {
  StrideRank rank(schedule, me, links, spec, options);
  if (absl::Status s = CheckCopySpec(me, spec, buffer.size()); !s.ok()) return rank.Reject(s);
  RingStats local;
  std::vector<StrideContribution> held;
  absl::Status result = rank.Gather(Mine(me, spec, buffer), held,
                                    [&spec](int r) { return ContributionBytes(spec, r); });
  const bool writing = result.ok();  // the caller's buffer is written from here on
  if (writing) {
    CopyResult(me, spec, held, buffer);
    result = rank.Commit();
  }
  rank.ExportStats(local);
  local.buffer_untouched = !result.ok() && !writing;
  if (stats != nullptr) *stats = local;
  return result;
}

}  // namespace ringsync
