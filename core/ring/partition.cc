#include "core/ring/partition.h"

#include <algorithm>

namespace ringsync {

ElementRange ChunkRange(size_t count, int chunks, int chunk) {
  const size_t n = static_cast<size_t>(chunks);
  const size_t c = static_cast<size_t>(chunk);
  const size_t base = count / n;
  const size_t larger = count % n;  // chunks [0, larger) get base + 1 elements
  return {c * base + std::min(c, larger), base + (c < larger ? 1 : 0)};
}

size_t SegmentCount(size_t chunk_elements, size_t segment_elements) {
  if (chunk_elements == 0) return 1;
  return (chunk_elements + segment_elements - 1) / segment_elements;
}

ElementRange SegmentRange(const ElementRange& chunk, size_t segment_elements, size_t segment) {
  const size_t begin = std::min(chunk.count, segment * segment_elements);
  const size_t end = std::min(chunk.count, begin + segment_elements);
  return {chunk.offset + begin, end - begin};
}

}  // namespace ringsync
