#include "core/ring/ring_broadcast.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "core/ring/ring_exchange.h"
#include "core/ring/ring_pipeline.h"
#include "core/ring/schedule.h"

namespace ringsync {
namespace {

constexpr int kData = 0;  // the buffer is one chunk
constexpr int kDone = 1;  // an empty chunk: the last rank's "everyone has it" notice

// Pieces of a broadcast per hop of the chain's fill (BroadcastPieces).
constexpr size_t kPiecesPerFillHop = 32;

}  // namespace

absl::Status CheckChainSpec(const RingMember& me, const CollectiveSpec& spec,
                            size_t buffer_bytes, size_t elements, CollectiveKind kind) {
  if (absl::Status valid = CheckBufferSize(me, spec, buffer_bytes, elements); !valid.ok()) {
    return valid;
  }
  if (spec.kind != kind) {
    return absl::InvalidArgumentError(absl::StrCat("the ", CollectiveKindName(kind),
                                                   " chain cannot run a ",
                                                   CollectiveKindName(spec.kind)));
  }
  if (spec.root < 0 || spec.root >= me.world_size) {
    return absl::InvalidArgumentError(absl::StrCat(CollectiveKindName(kind), " root ", spec.root,
                                                   " is outside a ring of ", me.world_size));
  }
  return absl::OkStatus();
}

size_t ChainSegmentBytes(size_t bytes, size_t pieces, size_t min_segment_bytes,
                         size_t max_segment_bytes) {
  const size_t piece = (bytes + pieces - 1) / pieces;
  return std::min(max_segment_bytes, std::max(piece, min_segment_bytes));
}

size_t BroadcastPieces(int world_size) {
  const size_t fill_hops = world_size > 2 ? static_cast<size_t>(world_size - 2) : 0;
  return std::max(kMinChainPieces, kPiecesPerFillHop * fill_hops);
}

absl::Status RingBroadcast(const RingMember& me, Link& link, const CollectiveSpec& spec,
                           absl::Span<std::byte> buffer, const RingOptions& options,
                           RingStats* stats) {
  RingExchange exchange(me, link, spec, options);
  const absl::Status valid =
      CheckChainSpec(me, spec, buffer.size(), spec.count, CollectiveKind::kBroadcast);
  if (!valid.ok()) return exchange.Reject(valid);
  const int n = me.world_size;
  if (n == 1) return absl::OkStatus();
  if (absl::Status agreed = exchange.AgreeBeforeTouching(stats); !agreed.ok()) return agreed;

  // Hops from the root: the root is 0, the last rank of the chain n-1.
  const int distance = RingMod(me.rank - spec.root, n);
  PipelinePlan plan;
  if (distance == 0) {
    plan.steps = {{0, kData, -1}, {n - 1, -1, kDone}};
  } else if (distance < n - 1) {
    plan.steps = {{distance - 1, -1, kData}, {distance, kData, -1}};
  } else {
    plan.steps = {{distance - 1, -1, kData}, {distance, kDone, -1}};
  }
  const size_t count = spec.count;
  plan.chunk_range = [count](int c) { return c == kData ? ElementRange{0, count} : ElementRange{}; };
  RingOptions chain = options;
  chain.segment_bytes = ChainSegmentBytes(buffer.size(), BroadcastPieces(n),
                                          exchange.min_segment_bytes(), options.segment_bytes);
  return RunCopyingPipeline(std::move(plan), exchange, spec, buffer, chain, stats);
}

}  // namespace ringsync
