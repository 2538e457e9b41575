// The staging arena: slices in ring order that never overlap one still held, space that
// comes back once every older slice is back, and nothing handed out after a retirement.
#include "client/src/staging_arena.h"

#include <memory>
#include <optional>
#include <vector>

#include "gtest/gtest.h"

namespace ringsync::internal {
namespace {

constexpr size_t kCapacity = 4096;

std::shared_ptr<StagingArena> MakeArena() {
  absl::StatusOr<std::shared_ptr<RegisteredMemory>> memory = RegisteredMemory::Create(kCapacity);
  EXPECT_TRUE(memory.ok()) << memory.status();
  return StagingArena::Create(*std::move(memory));
}

TEST(StagingArena, SlicesFollowEachOtherAlignedAndDoNotOverlap) {
  std::shared_ptr<StagingArena> arena = MakeArena();
  std::optional<StagingArena::Slice> a = arena->Take(100);
  std::optional<StagingArena::Slice> b = arena->Take(1);
  std::optional<StagingArena::Slice> c = arena->Take(64);
  ASSERT_TRUE(a && b && c);
  EXPECT_EQ(a->offset(), 0u);
  EXPECT_EQ(b->offset(), 128u) << "100 bytes take two 64-byte lines";
  EXPECT_EQ(c->offset(), 192u);
  EXPECT_EQ(c->data() - a->data(), 192);
}

TEST(StagingArena, WhenNothingIsHeldTheNextSliceBeginsAtTheStart) {
  std::shared_ptr<StagingArena> arena = MakeArena();
  for (int call = 0; call < 3; ++call) {
    std::optional<StagingArena::Slice> slice = arena->Take(1000);
    ASSERT_TRUE(slice) << call;
    EXPECT_EQ(slice->offset(), 0u) << "call " << call << ": the arena was empty";
  }
  std::optional<StagingArena::Slice> held = arena->Take(64);
  std::optional<StagingArena::Slice> next = arena->Take(64);
  ASSERT_TRUE(held && next);
  EXPECT_EQ(next->offset(), 64u) << "while one is out, slices follow it";
}

TEST(StagingArena, ASliceThatDoesNotFitNowIsRefusedAndFitsOnceTheOlderOnesAreBack) {
  std::shared_ptr<StagingArena> arena = MakeArena();
  std::optional<StagingArena::Slice> first = arena->Take(2048);
  std::optional<StagingArena::Slice> second = arena->Take(1024);
  ASSERT_TRUE(first && second);
  EXPECT_FALSE(arena->Take(2048)) << "only 1024 bytes are free";
  second.reset();
  EXPECT_FALSE(arena->Take(2048)) << "the older slice still holds the space after the newer";
  first.reset();
  std::optional<StagingArena::Slice> again = arena->Take(4096);
  ASSERT_TRUE(again) << "everything is back";
  EXPECT_EQ(again->offset(), 0u);
}

TEST(StagingArena, ASliceNeverWrapsAroundTheEnd) {
  std::shared_ptr<StagingArena> arena = MakeArena();
  std::optional<StagingArena::Slice> first = arena->Take(3072);
  std::optional<StagingArena::Slice> second = arena->Take(512);
  ASSERT_TRUE(first && second);
  first.reset();  // 3072 bytes free at the start, 512 at the end
  std::optional<StagingArena::Slice> third = arena->Take(1024);
  ASSERT_TRUE(third);
  EXPECT_EQ(third->offset(), 0u) << "it would have crossed the end: it begins the next lap";
  EXPECT_FALSE(arena->Take(2048 + 64)) << "only [1024, 3072) lies before `second`";
  std::optional<StagingArena::Slice> fourth = arena->Take(2048);
  ASSERT_TRUE(fourth);
  EXPECT_EQ(fourth->offset(), 1024u);
}

TEST(StagingArena, SlicesComingBackOutOfOrderFreeTheirSpaceWhenTheOldestIsBack) {
  std::shared_ptr<StagingArena> arena = MakeArena();
  std::vector<StagingArena::Slice> slices;
  for (int i = 0; i < 4; ++i) {
    std::optional<StagingArena::Slice> slice = arena->Take(1024);
    ASSERT_TRUE(slice) << i;
    slices.push_back(*std::move(slice));
  }
  EXPECT_FALSE(arena->Take(1));
  slices.erase(slices.begin() + 1, slices.end());  // the three newest come back
  EXPECT_FALSE(arena->Take(1024)) << "the oldest still holds the ring";
  slices.clear();
  EXPECT_TRUE(arena->Take(4096));
}

TEST(StagingArena, ASliceLargerThanTheArenaOrEmptyIsRefused) {
  std::shared_ptr<StagingArena> arena = MakeArena();
  EXPECT_FALSE(arena->Take(kCapacity + 1));
  EXPECT_FALSE(arena->Take(0));
  EXPECT_TRUE(arena->Take(kCapacity));
}

TEST(StagingArena, ARetiredSliceEndsTheArenaWhichLivesUntilItsLastSliceIsGone) {
  std::shared_ptr<StagingArena> arena = MakeArena();
  std::optional<StagingArena::Slice> running = arena->Take(64);
  std::optional<StagingArena::Slice> cancelled = arena->Take(64);
  ASSERT_TRUE(running && cancelled);
  cancelled->Retire();
  cancelled.reset();
  EXPECT_TRUE(arena->retired());
  EXPECT_FALSE(arena->Take(64)) << "the worker may still write into the retired slice";
  std::weak_ptr<StagingArena> weak = arena;
  arena.reset();
  EXPECT_FALSE(weak.expired()) << "a slice in use keeps its memory";
  running.reset();
  EXPECT_TRUE(weak.expired());
}

}  // namespace
}  // namespace ringsync::internal
