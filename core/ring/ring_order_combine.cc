#include "core/ring/ring_order_combine.h"

#include <cstring>

#include "core/ring/partition.h"
#include "core/ring/schedule.h"

namespace ringsync {

absl::Status CombineInRingOrder(const RingMember& me, Reducer& reducer, const ReduceSpec& rspec,
                                size_t count, size_t esize,
                                const std::vector<absl::Span<const std::byte>>& contributions,
                                absl::Span<std::byte> out, RingStats& stats) {
  const int n = me.world_size;
  std::vector<std::byte> running;
  std::vector<std::byte> next;
  for (int c = 0; c < n; ++c) {
    const ElementRange range = ChunkRange(count, n, c);
    if (range.count == 0) continue;
    const size_t offset = range.offset * esize;
    const size_t bytes = range.count * esize;
    // Chunk c's reduction starts at rank c+1 and ends at rank c (schedule.h).
    const absl::Span<const std::byte> first = contributions[RingMod(c + 1, n)];
    running.assign(first.begin() + offset, first.begin() + offset + bytes);
    ReduceStats rstats;
    for (int k = 2; k <= n; ++k) {
      const absl::Span<const std::byte> theirs = contributions[RingMod(c + k, n)];
      next.assign(theirs.begin() + offset, theirs.begin() + offset + bytes);
      if (absl::Status s = reducer.Combine(rspec, next.data(), running.data(), range.count, &rstats);
          !s.ok()) {
        return s;
      }
      running.swap(next);
    }
    if (absl::Status s = reducer.Finalize(rspec, running.data(), range.count, &rstats); !s.ok()) {
      return s;
    }
    stats.overflows += rstats.overflows;
    std::memcpy(out.data() + offset, running.data(), bytes);
  }
  return absl::OkStatus();
}

}  // namespace ringsync
