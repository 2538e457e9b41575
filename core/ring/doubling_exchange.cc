#include "core/ring/doubling_exchange.h"

#include <cstring>
#include <vector>

namespace ringsync {

absl::Status DoublingExchange(StrideRank& rank, const RingMember& me,
                              absl::Span<const DirectRoute> routes,
                              absl::FunctionRef<size_t(int from, int to)> block_bytes,
                              size_t segment_bytes) {
  const int n = me.world_size;
  // held[i]: the block now at position i (distance i from its origin to its destination).
  std::vector<std::vector<std::byte>> held(static_cast<size_t>(n));
  for (int i = 1; i < n; ++i) {
    const absl::Span<const std::byte> mine = routes[static_cast<size_t>(RingMod(me.rank + i, n))].send;
    held[static_cast<size_t>(i)].assign(mine.begin(), mine.end());
  }
  std::vector<std::byte> out, in;
  for (int stride = 1; stride < n; stride *= 2) {
    out.clear();
    size_t incoming = 0;
    for (int i = 1; i < n; ++i) {
      if ((i & stride) == 0) continue;
      const std::vector<std::byte>& block = held[static_cast<size_t>(i)];
      out.insert(out.end(), block.begin(), block.end());
      const int origin = RingMod(me.rank - (i & (2 * stride - 1)), n);
      incoming += block_bytes(origin, RingMod(origin + i, n));
    }
    in.resize(incoming);
    std::vector<DirectRoute> round(static_cast<size_t>(n));
    round[static_cast<size_t>(RingMod(me.rank + stride, n))].send = out;
    round[static_cast<size_t>(RingMod(me.rank - stride, n))].receive = absl::MakeSpan(in);
    if (absl::Status s = rank.Transfer(round, segment_bytes); !s.ok()) return s;
    size_t at = 0;
    for (int i = 1; i < n; ++i) {
      if ((i & stride) == 0) continue;
      const int origin = RingMod(me.rank - (i & (2 * stride - 1)), n);
      const size_t bytes = block_bytes(origin, RingMod(origin + i, n));
      held[static_cast<size_t>(i)].assign(in.begin() + static_cast<ptrdiff_t>(at),
                                          in.begin() + static_cast<ptrdiff_t>(at + bytes));
      at += bytes;
    }
  }
  for (int i = 1; i < n; ++i) {
    const std::vector<std::byte>& block = held[static_cast<size_t>(i)];
    const absl::Span<std::byte> into = routes[static_cast<size_t>(RingMod(me.rank - i, n))].receive;
    if (!block.empty()) std::memcpy(into.data(), block.data(), block.size());
  }
  return absl::OkStatus();
}

}  // namespace ringsync
