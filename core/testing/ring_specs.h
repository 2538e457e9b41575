// Test helper: the specs and options the ring collectives' specifications share.
#pragma once

#include <cstddef>
#include <string>

#include "absl/time/time.h"
#include "core/collective.h"

namespace ringsync::testing {

// Collective #1 of `kind`, named after its kind.
inline CollectiveSpec Spec(CollectiveKind kind, DType dtype, size_t count, int root = 0) {
  CollectiveSpec spec;
  spec.kind = kind;
  spec.name = std::string(CollectiveKindName(kind));
  spec.sequence = 1;
  spec.dtype = dtype;
  spec.count = count;
  spec.root = root;
  return spec;
}

// 40-byte segments, so that even a few elements travel as several segments and the
// pipeline's segment-by-segment paths run; a 10 s timeout.
inline RingOptions SmallSegments() {
  RingOptions options;
  options.segment_bytes = 40;
  options.timeout = absl::Seconds(10);
  return options;
}

}  // namespace ringsync::testing
