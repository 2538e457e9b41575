// Fuzzes the worker's side of arrival marks (daemon/shm/arrival_marks.h): a layout a client
// named in its request, checked by ValidateArrivalLayout, then marks the client wrote as
// it liked, read by ArrivalMarks::AwaitBytes for ranges the ring asks for.
//
// Input: the buffer's size (4 bytes, below 8 MiB), the layout (4 x 8 bytes: tensor offset,
// tensor bytes, block bytes, marks offset), three ranges (2 x 8 bytes each), then the
// buffer's bytes. Beyond "no crash, no sanitizer report" (the buffer is exactly its size,
// so a read outside it is caught): a layout is accepted only if its marks lie inside the
// buffer and clear of the tensor, and a range counts as arrived exactly when every block
// it touches is marked non-zero.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "fuzz/fuzz_check.h"
#include "daemon/shm/arrival_marks.h"

namespace {

uint64_t Take(const uint8_t*& data, size_t& size, size_t bytes) {
  uint64_t value = 0;
  const size_t n = std::min(bytes, size);
  std::memcpy(&value, data, n);
  data += n;
  size -= n;
  return value;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ringsync;
  const uint64_t buffer_bytes = Take(data, size, 4) % (uint64_t{8} << 20);
  ArrivalLayout layout;
  layout.tensor_offset = Take(data, size, 8);
  layout.tensor_bytes = Take(data, size, 8);
  layout.block_bytes = Take(data, size, 8);
  layout.marks_offset = Take(data, size, 8);
  uint64_t ranges[3][2];
  for (auto& range : ranges) {
    range[0] = Take(data, size, 8);
    range[1] = Take(data, size, 8);
  }
  if (!ValidateArrivalLayout(layout, buffer_bytes).ok()) return 0;
  FUZZ_CHECK(layout.marks_offset % 4 == 0);
  FUZZ_CHECK(layout.marks_offset + layout.marks_bytes() <= buffer_bytes);
  FUZZ_CHECK(layout.blocks() <= kMaxArrivalBlocks);

  // Words, so the buffer is aligned as a mapping is; exactly buffer_bytes of them are used.
  std::vector<uint32_t> words((buffer_bytes + 3) / 4);
  auto* buffer = reinterpret_cast<std::byte*>(words.data());
  std::memcpy(buffer, data, std::min<uint64_t>(size, buffer_bytes));
  const std::byte* marks = buffer + layout.marks_offset;
  const ArrivalMarks seen(marks, layout, nullptr);
  const WaitLimit now{SteadyDeadline(absl::ZeroDuration()), nullptr};
  FUZZ_CHECK(layout.tensor_offset + layout.tensor_bytes <= buffer_bytes);
  for (const auto& range : ranges) {
    const size_t offset = range[0] % (layout.tensor_bytes + 2);
    const size_t length = range[1] % (layout.tensor_bytes + 2);
    const absl::Status status = seen.AwaitBytes(offset, length, now);
    if (length == 0) {
      FUZZ_CHECK(status.ok());
      continue;
    }
    if (offset + length > layout.tensor_bytes) {
      FUZZ_CHECK(absl::IsInternal(status));
      continue;
    }
    bool all_marked = true;
    for (uint64_t b = offset / layout.block_bytes; b <= (offset + length - 1) / layout.block_bytes;
         ++b) {
      uint32_t mark;
      std::memcpy(&mark, marks + 4 * (2 + b), 4);  // after the count and the awaited block
      all_marked = all_marked && mark != 0;
    }
    FUZZ_CHECK(status.ok() == all_marked);
    FUZZ_CHECK(status.ok() || absl::IsDeadlineExceeded(status));
  }
  return 0;
}
