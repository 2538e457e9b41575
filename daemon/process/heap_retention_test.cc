// The worker's heap keeps what it frees: a collective that allocates and frees the same
// tensor-sized buffers as the one before it faults no new memory in.
#include "daemon/process/heap_retention.h"

#include <sys/resource.h>

#include <cstdlib>
#include <cstring>
#include <vector>

#include "gtest/gtest.h"

namespace ringsync {
namespace {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitizerAllocator = true;
#else
constexpr bool kSanitizerAllocator = false;
#endif

long MinorFaults() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_minflt;
}

// One "collective": eight 512 KiB buffers alive at once, written, then freed.
void AllocateTouchAndFree() {
  constexpr size_t kBlock = size_t{512} << 10;
  std::vector<void*> blocks;
  for (int i = 0; i < 8; ++i) {
    void* block = std::malloc(kBlock);
    ASSERT_NE(block, nullptr);
    std::memset(block, i, kBlock);
    blocks.push_back(block);
  }
  for (void* block : blocks) std::free(block);
}

TEST(HeapRetention, RepeatedTensorSizedAllocationsFaultNoNewMemoryIn) {
  if (kSanitizerAllocator) GTEST_SKIP() << "a sanitizer's allocator does not take mallopt";
  ASSERT_TRUE(KeepFreedHeapMemory());
  AllocateTouchAndFree();  // the first round maps the memory
  const long before = MinorFaults();
  for (int round = 0; round < 20; ++round) AllocateTouchAndFree();
  // Each round touches 1,024 pages; given back each time, 20 rounds would fault ~20,000.
  EXPECT_LT(MinorFaults() - before, 1024) << "freed memory went back to the kernel";
}

}  // namespace
}  // namespace ringsync
