// The kinds of collective, shared by every layer of ringsync from the SDK's public surface
// (this header is part of it: it includes only the standard library) down to the wire.
//
// Thread-safety: a plain enum.
#pragma once

#include <cstdint>

namespace ringsync {

// Values are part of the wire contract: never renumber.
enum class CollectiveKind : uint8_t {
  kAllReduce = 1,
  kBroadcast = 2,
  kAllGather = 3,
  kBarrier = 4,
  kReduceScatter = 5,
  kScatter = 6,
  kGather = 7,
  kAllToAll = 8,
};

}  // namespace ringsync
