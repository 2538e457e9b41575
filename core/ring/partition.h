// Splitting a buffer of `count` elements into N contiguous chunks whose sizes differ
// by at most one element: the first `count % N` chunks hold one element more.
// Works for any count, including 0 and count < N (trailing chunks are then empty).
#pragma once

#include <cstddef>

namespace ringsync {

struct ElementRange {
  size_t offset = 0;  // first element
  size_t count = 0;   // number of elements

  size_t end() const { return offset + count; }
  friend bool operator==(const ElementRange&, const ElementRange&) = default;
};

// Chunk `chunk` (0 <= chunk < chunks) of a buffer of `count` elements.
ElementRange ChunkRange(size_t count, int chunks, int chunk);

// A chunk travels as segments of at most `segment_elements` elements so that receive,
// reduce and send overlap. An empty chunk still travels as one empty segment: every
// step then exchanges at least one frame, which carries the agreement check and makes
// a zero-element collective a barrier.
size_t SegmentCount(size_t chunk_elements, size_t segment_elements);
ElementRange SegmentRange(const ElementRange& chunk, size_t segment_elements, size_t segment);

}  // namespace ringsync
