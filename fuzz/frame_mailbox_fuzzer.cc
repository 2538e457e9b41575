// Fuzzes FrameMailboxReader::TryTake, the first code to read what a same-host peer (a ring
// neighbour's frames) or the training process (its call channel) wrote into shared memory.
//
// Input: one mode byte, then bytes. Mode even: the bytes are the whole area as a peer
// left it (positions, lengths, data), read as it is. Mode odd: a well-behaved writer puts
// records cut from the bytes, then one byte of the area is overwritten (where and with
// what, from the input's last bytes) — a scribble in an otherwise valid mailbox.
// Beyond "no crash, no sanitizer report": every record the reader hands out is at most
// the largest a writer may put, and in the odd mode before the scribble point the records
// are exactly those written.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "daemon/shm/frame_mailbox.h"
#include "fuzz/fuzz_check.h"

namespace ringsync {
namespace {

constexpr uint64_t kCapacity = 4096;

void ReadAll(FrameMailboxReader& reader) {
  for (int i = 0; i < 4096; ++i) {
    absl::StatusOr<std::optional<std::vector<std::byte>>> record = reader.TryTake();
    if (!record.ok() || !record->has_value()) return;
    FUZZ_CHECK((*record)->size() <= FrameMailboxLayout::MaxRecordBytes(kCapacity));
  }
}

}  // namespace
}  // namespace ringsync

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ringsync;
  if (size < 1) return 0;
  std::vector<std::byte> area(FrameMailboxLayout::AreaBytes(kCapacity));
  const uint8_t mode = data[0];
  ++data;
  --size;
  if (mode % 2 == 0) {
    std::memcpy(area.data(), data, std::min(size, area.size()));
    FrameMailboxReader reader(absl::MakeSpan(area), kCapacity);
    ReadAll(reader);
    return 0;
  }
  if (size < 3) return 0;
  FrameMailboxWriter writer(absl::MakeSpan(area), kCapacity);
  FrameMailboxReader reader(absl::MakeSpan(area), kCapacity);
  const size_t body = size - 3;
  size_t at = 0;
  std::vector<std::vector<std::byte>> written;
  size_t taken = 0;  // the reader falls behind: one take per two puts
  while (at < body) {
    const size_t length = std::min<size_t>(data[at] * 7u, body - at - 1);
    const auto* start = reinterpret_cast<const std::byte*>(data + at + 1);
    const absl::Span<const std::byte> pieces[] = {{start, length}};
    if (!writer.Put(pieces, WaitLimit{SteadyDeadline(absl::ZeroDuration()), nullptr}, [] { return true; }).ok()) break;
    written.emplace_back(start, start + length);
    // Take every other record, so the writer laps the area.
    if (written.size() % 2 == 0) {
      absl::StatusOr<std::optional<std::vector<std::byte>>> got = reader.TryTake();
      FUZZ_CHECK(got.ok() && got->has_value());
      FUZZ_CHECK(**got == written[taken]);
      ++taken;
    }
    at += 1 + length;
  }
  const size_t where = (static_cast<size_t>(data[body]) << 8 | data[body + 1]) % area.size();
  area[where] = static_cast<std::byte>(data[body + 2]);
  ReadAll(reader);
  return 0;
}
