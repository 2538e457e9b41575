#include "core/ring/doubling_exchange.h"

#include <algorithm>
#include <cstring>
#include <vector>

namespace ringsync {
namespace {

// Whether every other rank's block is sent from and received into the same place, all of
// one size: an even all-to-all in place, whose buffer can hold the blocks in transit.
bool EvenInPlace(const RingMember& me, absl::Span<const DirectRoute> routes) {
  const size_t size = routes[static_cast<size_t>(RingMod(me.rank + 1, me.world_size))].send.size();
  for (int r = 0; r < me.world_size; ++r) {
    if (r == me.rank) continue;
    const DirectRoute& route = routes[static_cast<size_t>(r)];
    if (route.send.data() != route.receive.data() || route.send.size() != size ||
        route.receive.size() != size) {
      return false;
    }
  }
  return true;
}

}  // namespace

absl::Status DoublingExchange(StrideRank& rank, const RingMember& me,
                              absl::Span<const DirectRoute> routes,
                              absl::FunctionRef<size_t(int from, int to)> block_bytes,
                              size_t segment_bytes) {
  const int n = me.world_size;
  const auto at_distance = [&](int i) { return static_cast<size_t>(RingMod(me.rank + i, n)); };
  // place[i]: the block now at position i (distance i from its origin to its destination).
  // In place, where the block for rank+i lay (blocks keep one size); otherwise in `held`,
  // sized anew as blocks of other sizes arrive.
  const bool in_place = EvenInPlace(me, routes);
  std::vector<std::vector<std::byte>> held(in_place ? 0 : static_cast<size_t>(n));
  std::vector<absl::Span<std::byte>> place(static_cast<size_t>(n));
  for (int i = 1; i < n; ++i) {
    if (in_place) {
      place[static_cast<size_t>(i)] = routes[at_distance(i)].receive;
      continue;
    }
    const absl::Span<const std::byte> mine = routes[at_distance(i)].send;
    held[static_cast<size_t>(i)].assign(mine.begin(), mine.end());
    place[static_cast<size_t>(i)] = absl::MakeSpan(held[static_cast<size_t>(i)]);
  }
  std::vector<std::byte> out, in;
  std::vector<size_t> arriving(static_cast<size_t>(n));  // this round's block at position i
  for (int stride = 1; stride < n; stride *= 2) {
    out.clear();
    size_t incoming = 0;
    for (int i = 1; i < n; ++i) {
      if ((i & stride) == 0) continue;
      const absl::Span<const std::byte> block = place[static_cast<size_t>(i)];
      out.insert(out.end(), block.begin(), block.end());
      const int origin = RingMod(me.rank - (i & (2 * stride - 1)), n);
      arriving[static_cast<size_t>(i)] = block_bytes(origin, RingMod(origin + i, n));
      incoming += arriving[static_cast<size_t>(i)];
    }
    in.resize(incoming);
    std::vector<DirectRoute> round(static_cast<size_t>(n));
    round[at_distance(stride)].send = out;
    round[static_cast<size_t>(RingMod(me.rank - stride, n))].receive = absl::MakeSpan(in);
    if (absl::Status s = rank.Transfer(round, segment_bytes); !s.ok()) return s;
    size_t at = 0;
    for (int i = 1; i < n; ++i) {
      if ((i & stride) == 0) continue;
      const size_t bytes = arriving[static_cast<size_t>(i)];
      if (!in_place) {
        held[static_cast<size_t>(i)].resize(bytes);
        place[static_cast<size_t>(i)] = absl::MakeSpan(held[static_cast<size_t>(i)]);
      }
      if (bytes > 0) std::memcpy(place[static_cast<size_t>(i)].data(), in.data() + at, bytes);
      at += bytes;
    }
  }
  // Position i holds the block from rank-i, which belongs where rank-i's block goes: in
  // place, where the block for rank+i lay, so positions i and n-i change places.
  if (in_place) {
    std::vector<std::byte> spare;
    for (int i = 1; i < n - i; ++i) {
      const absl::Span<std::byte> a = place[static_cast<size_t>(i)];
      const absl::Span<std::byte> b = place[static_cast<size_t>(n - i)];
      spare.assign(a.begin(), a.end());
      std::copy(b.begin(), b.end(), a.begin());
      std::copy(spare.begin(), spare.end(), b.begin());
    }
    return absl::OkStatus();
  }
  for (int i = 1; i < n; ++i) {
    const absl::Span<const std::byte> block = place[static_cast<size_t>(i)];
    const absl::Span<std::byte> into = routes[static_cast<size_t>(RingMod(me.rank - i, n))].receive;
    if (!block.empty()) std::memcpy(into.data(), block.data(), block.size());
  }
  return absl::OkStatus();
}

}  // namespace ringsync
