// The memory behind a registered buffer, and how spans are found inside one.
#include "client/src/registered_memory.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <vector>

#include "client/src/registered_buffer_registry.h"
#include "gtest/gtest.h"

namespace ringsync::internal {
namespace {

TEST(RegisteredMemory, IsAZeroedMemfdWhoseSizeIsSealed) {
  absl::StatusOr<std::shared_ptr<RegisteredMemory>> memory = RegisteredMemory::Create(10'000);
  ASSERT_TRUE(memory.ok()) << memory.status();
  EXPECT_EQ((*memory)->size(), 10'000u);
  const int seals = fcntl((*memory)->fd(), F_GET_SEALS);
  EXPECT_EQ(seals & (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL),
            F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL);
  EXPECT_NE(ftruncate((*memory)->fd(), 100), 0) << "nobody can shrink it under the worker";
  const auto* bytes = static_cast<const unsigned char*>((*memory)->data());
  for (size_t i = 0; i < 10'000; i += 997) EXPECT_EQ(bytes[i], 0);
  EXPECT_FALSE(RegisteredMemory::Create(0).ok());
}

// Minor page faults this thread has taken so far.
long MinorFaultsOfThisThread() {
  rusage usage{};
  getrusage(RUSAGE_THREAD, &usage);
  return usage.ru_minflt;
}

// A staging buffer is written once per page by the first collective that uses it; a fault
// per page there (16,384 for 64 MiB, microseconds each on a VM) made that collective
// slow, so the buffer comes mapped in full.
TEST(RegisteredMemory, IsMappedInFullWhenCreatedSoItsFirstWritesTakeNoPageFaults) {
  constexpr size_t kPages = 2048;
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  absl::StatusOr<std::shared_ptr<RegisteredMemory>> memory =
      RegisteredMemory::Create(kPages * page);
  ASSERT_TRUE(memory.ok()) << memory.status();
  auto* bytes = static_cast<volatile unsigned char*>((*memory)->data());
  const long before = MinorFaultsOfThisThread();
  for (size_t i = 0; i < kPages; ++i) bytes[i * page] = 1;
  // Unmapped, that is one fault per page; AddressSanitizer's shadow memory may fault once
  // every 8 pages.
  EXPECT_LT(MinorFaultsOfThisThread() - before, static_cast<long>(kPages / 4));
}

TEST(RegisteredBufferRegistry, FindsTheBufferHoldingAWholeSpanAndTellsTheWorkerWhenItGoes) {
  std::vector<uint64_t> released;
  auto registry = std::make_shared<RegisteredBufferRegistry>(
      [&](uint64_t id) { released.push_back(id); });
  std::vector<char> a(100), b(50);
  registry->Add(7, a.data(), a.size());
  registry->Add(9, b.data(), b.size());
  auto found = registry->Find(a.data() + 10, 90);
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->id, 7u);
  EXPECT_EQ(found->offset, 10u);
  EXPECT_FALSE(registry->Find(a.data() + 10, 91).has_value()) << "runs past its end";
  EXPECT_EQ(registry->Find(b.data(), 50)->id, 9u);
  char elsewhere[8];
  EXPECT_FALSE(registry->Find(elsewhere, 8).has_value());
  registry->Remove(7, a.data());
  EXPECT_FALSE(registry->Find(a.data(), 1).has_value());
  registry->Close();
  registry->Remove(9, b.data());
  EXPECT_EQ(released, std::vector<uint64_t>{7}) << "after Close the worker is not told";
}

}  // namespace
}  // namespace ringsync::internal
