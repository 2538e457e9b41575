// Specification of how a buffer is cut into chunks and segments.
#include "core/ring/partition.h"

#include <cstddef>

#include "gtest/gtest.h"

namespace ringsync {
namespace {

TEST(ChunkRange, ChunksTileTheBufferAndDifferByAtMostOneElement) {
  for (size_t count : {size_t{0}, size_t{1}, size_t{2}, size_t{3}, size_t{7}, size_t{15},
                       size_t{16}, size_t{17}, size_t{97}, size_t{1000003}}) {
    for (int n = 1; n <= 16; ++n) {
      size_t next_offset = 0, smallest = count, largest = 0;
      for (int c = 0; c < n; ++c) {
        const ElementRange r = ChunkRange(count, n, c);
        EXPECT_EQ(r.offset, next_offset) << "count " << count << " n " << n << " chunk " << c;
        next_offset = r.end();
        smallest = std::min(smallest, r.count);
        largest = std::max(largest, r.count);
      }
      EXPECT_EQ(next_offset, count) << "chunks must cover the buffer exactly";
      EXPECT_LE(largest - smallest, 1u) << "count " << count << " n " << n;
    }
  }
}

TEST(ChunkRange, LargerChunksComeFirst) {
  // 10 elements over 4 ranks: 3, 3, 2, 2.
  EXPECT_EQ(ChunkRange(10, 4, 0), (ElementRange{0, 3}));
  EXPECT_EQ(ChunkRange(10, 4, 1), (ElementRange{3, 3}));
  EXPECT_EQ(ChunkRange(10, 4, 2), (ElementRange{6, 2}));
  EXPECT_EQ(ChunkRange(10, 4, 3), (ElementRange{8, 2}));
}

TEST(ChunkRange, FewerElementsThanRanksLeavesTrailingChunksEmpty) {
  EXPECT_EQ(ChunkRange(2, 4, 0), (ElementRange{0, 1}));
  EXPECT_EQ(ChunkRange(2, 4, 1), (ElementRange{1, 1}));
  EXPECT_EQ(ChunkRange(2, 4, 2).count, 0u);
  EXPECT_EQ(ChunkRange(2, 4, 3).count, 0u);
}

TEST(Segments, AChunkIsCutIntoSegmentsOfAtMostTheSegmentSize) {
  const ElementRange chunk{100, 10};
  ASSERT_EQ(SegmentCount(chunk.count, 4), 3u);
  EXPECT_EQ(SegmentRange(chunk, 4, 0), (ElementRange{100, 4}));
  EXPECT_EQ(SegmentRange(chunk, 4, 1), (ElementRange{104, 4}));
  EXPECT_EQ(SegmentRange(chunk, 4, 2), (ElementRange{108, 2}));
}

TEST(Segments, AnEmptyChunkStillTravelsAsOneEmptySegment) {
  EXPECT_EQ(SegmentCount(0, 4), 1u);
  EXPECT_EQ(SegmentRange(ElementRange{7, 0}, 4, 0), (ElementRange{7, 0}));
}

}  // namespace
}  // namespace ringsync
