#include "core/ring/direct_transfer.h"

#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/ring/doubling_exchange.h"
#include "core/ring/ring_gather.h"
#include "core/ring/ring_pipeline.h"
#include "core/ring/ring_scatter.h"
#include "core/ring/stride_allreduce.h"
#include "core/ring/stride_copying.h"

namespace ringsync {
namespace {

// An uneven all-to-all's blocks (its buffer: the input, then the result): block r of the
// input to rank r, rank r's into block r of the result; routes[rank] is its own block, to
// copy (StrideRank::Transfer ignores a rank's own route).
std::vector<DirectRoute> UnevenRoutesOf(const CollectiveSpec& spec, absl::Span<std::byte> buffer) {
  const size_t esize = DTypeSize(spec.dtype);
  const size_t n = spec.send_counts.size();
  std::vector<DirectRoute> routes(n);
  size_t sent = 0;
  size_t received = spec.count * esize;
  for (size_t r = 0; r < n; ++r) {
    routes[r].send = buffer.subspan(sent, spec.send_counts[r] * esize);
    routes[r].receive = buffer.subspan(received, spec.receive_counts[r] * esize);
    sent += routes[r].send.size();
    received += routes[r].receive.size();
  }
  return routes;
}

// What this rank sends to and receives from each rank (by rank): the root's block r to
// rank r (scatter), rank r's input to the root's slot r (gather), or this rank's block r
// to rank r and rank r's for this one in its place (all-to-all; an uneven one's blocks
// as UnevenRoutesOf says).
std::vector<DirectRoute> RoutesOf(const RingMember& me, const CollectiveSpec& spec,
                                  absl::Span<std::byte> buffer) {
  const size_t n = static_cast<size_t>(me.world_size);
  const size_t rank = static_cast<size_t>(me.rank);
  if (HasUnevenBlocks(spec)) return UnevenRoutesOf(spec, buffer);
  const size_t root = static_cast<size_t>(spec.root);
  const size_t block = spec.kind == CollectiveKind::kGather ? spec.count * DTypeSize(spec.dtype)
                                                            : buffer.size() / n;
  auto block_of = [&](size_t r) { return buffer.subspan(r * block, block); };
  std::vector<DirectRoute> routes(n);
  for (size_t r = 0; r < n; ++r) {
    if (r == rank) continue;
    switch (spec.kind) {
      case CollectiveKind::kAllToAll:
        // Rank r's block lands in place of the one sent there, each segment once this
        // rank's own has gone (StrideRank::Transfer).
        routes[r] = DirectRoute{block_of(r), block_of(r)};
        break;
      case CollectiveKind::kScatter:
        if (rank == root) routes[r].send = block_of(r);
        if (r == root) routes[r].receive = block_of(rank);
        break;
      case CollectiveKind::kGather:
        if (rank == root) routes[r].receive = block_of(r);
        if (r == root) routes[r].send = block_of(0);  // a gather's input is in the first slot
        break;
      default:
        break;
    }
  }
  return routes;
}

absl::Status CheckTransferSpec(const RingMember& me, const CollectiveSpec& spec,
                               size_t buffer_bytes) {
  switch (spec.kind) {
    case CollectiveKind::kScatter: return CheckScatterSpec(me, spec, buffer_bytes);
    case CollectiveKind::kGather: return CheckGatherSpec(me, spec, buffer_bytes);
    case CollectiveKind::kAllToAll: return CheckAllToAllSpec(me, spec, buffer_bytes);
    default:
      return absl::InvalidArgumentError(absl::StrCat(
          "a direct transfer moves a scatter's, a gather's or an all-to-all's data, not a ",
          CollectiveKindName(spec.kind), "'s"));
  }
}

// Whether this rank writes into its buffer: a scatter's other ranks, a gather's root and
// every rank of an all-to-all.
bool Writes(const RingMember& me, const CollectiveSpec& spec) {
  if (spec.kind == CollectiveKind::kAllToAll) return true;
  return (spec.kind == CollectiveKind::kScatter) != (me.rank == spec.root);
}

}  // namespace

absl::Status CheckAllToAllSpec(const RingMember& me, const CollectiveSpec& spec,
                               size_t buffer_bytes) {
  if (spec.kind != CollectiveKind::kAllToAll) {
    return absl::InvalidArgumentError(
        absl::StrCat("an all-to-all cannot run a ", CollectiveKindName(spec.kind)));
  }
  if (HasUnevenBlocks(spec)) {
    const std::optional<uint64_t> elements = WorkingElements(spec, me.world_size);
    if (!elements.has_value()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "alltoall with ", spec.send_counts.size(), " split sizes on a ring of ",
          me.world_size, " ranks: give one per rank"));
    }
    return CheckBufferSize(me, spec, buffer_bytes, *elements);
  }
  if (absl::Status s = CheckBufferSize(me, spec, buffer_bytes, spec.count); !s.ok()) return s;
  if (spec.count % static_cast<uint64_t>(me.world_size) != 0) {
    return absl::InvalidArgumentError(absl::StrCat("alltoall of ", spec.count,
                                                   " elements: not one block for each of ",
                                                   me.world_size, " ranks"));
  }
  return absl::OkStatus();
}

std::optional<StrideSchedule> DirectTransferSchedule(const CollectiveSpec& spec, int world_size,
                                                     const AlgorithmPolicy& policy) {
  const bool all_to_all = spec.kind == CollectiveKind::kAllToAll;
  const bool rooted = spec.kind == CollectiveKind::kScatter || spec.kind == CollectiveKind::kGather;
  const bool mode_allows = all_to_all || policy.mode == AlgorithmPolicy::Mode::kAuto ||
                           policy.mode == AlgorithmPolicy::Mode::kDirect;
  if ((!all_to_all && !rooted) || !IsValid(spec.dtype) || !policy.stride_links ||
      world_size < (all_to_all ? 1 : 3) || (world_size > kDirectRanksLimit && !all_to_all) ||
      !mode_allows || StrideScheduleToCopy(spec, world_size, policy).has_value()) {
    return std::nullopt;
  }
  // Beyond it a worker links only to the doubling's strides: the passes, and the data
  // (DoublingExchange), go over those.
  if (world_size > kDirectRanksLimit) return StrideSchedule::kDoubling;
  // The passes carry a spec each: over the links the worker connects as the ring forms.
  return SmallestAllReduceSchedule(world_size, policy).value_or(StrideSchedule::kDirect);
}

absl::Status DirectTransfer(StrideSchedule schedule, const RingMember& me, StrideLinks& links,
                            const CollectiveSpec& spec, absl::Span<std::byte> buffer,
                            const RingOptions& options, RingStats* stats) {
  StrideRank rank(schedule, me, links, spec, options);
  if (absl::Status s = CheckTransferSpec(me, spec, buffer.size()); !s.ok()) return rank.Reject(s);
  RingStats local;
  std::vector<StrideContribution> held;
  absl::Status result = rank.Gather({}, held, [](int) { return uint64_t{0}; });
  if (result.ok() && HasUnevenBlocks(spec)) {
    // Every rank holds every spec now: each finds the same mismatch, if any.
    std::vector<CollectiveSpec> specs;
    for (const StrideContribution& contribution : held) specs.push_back(contribution.spec);
    if (absl::Status s = CheckAllToAllCounts(specs); !s.ok()) result = rank.Reject(s);
  }
  const bool writing = result.ok() && Writes(me, spec);
  if (result.ok()) {
    const size_t slot = spec.count * DTypeSize(spec.dtype);
    if (spec.kind == CollectiveKind::kGather && me.rank == spec.root && me.rank > 0 &&
        slot > 0) {
      // The root's own input takes its slot before rank 0's block arrives in the first.
      std::memmove(buffer.data() + slot * static_cast<size_t>(me.rank), buffer.data(), slot);
    }
    const std::vector<DirectRoute> routes = RoutesOf(me, spec, buffer);
    if (HasUnevenBlocks(spec)) {
      const DirectRoute& own = routes[static_cast<size_t>(me.rank)];
      if (!own.send.empty()) std::memcpy(own.receive.data(), own.send.data(), own.send.size());
    }
    if (me.world_size > kDirectRanksLimit) {
      const size_t esize = DTypeSize(spec.dtype);
      const size_t even_block = buffer.size() / static_cast<size_t>(me.world_size);
      result = DoublingExchange(
          rank, me, routes,
          [&](int from, int to) {
            return HasUnevenBlocks(spec) ? held[static_cast<size_t>(from)].spec.send_counts[to] * esize
                                         : even_block;
          },
          options.segment_bytes);
    } else {
      result = rank.Transfer(routes, options.segment_bytes);
    }
    if (result.ok()) result = rank.Commit();
  }
  rank.ExportStats(local);
  local.buffer_untouched = !result.ok() && !writing;
  if (stats != nullptr) *stats = local;
  return result;
}

}  // namespace ringsync
