// Where the two mailboxes of a call channel (worker.proto, OpenCallChannel) lie in the
// registered buffer that holds them: the client's requests, then the worker's answers,
// each a frame mailbox area (daemon/shm/frame_mailbox.h) of the same capacity.
#pragma once

#include <cstddef>
#include <cstdint>

#include "absl/types/span.h"
#include "daemon/shm/frame_mailbox.h"

namespace ringsync {

struct CallChannelLayout {
  // What the SDK offers: room for a fused collective's largest spec (about 0.6 MiB) in
  // one record.
  static constexpr uint64_t kDefaultCapacity = uint64_t{2} << 20;
  static constexpr uint64_t BufferBytes(uint64_t capacity) {
    return 2 * FrameMailboxLayout::AreaBytes(capacity);
  }
  static constexpr uint64_t RequestsOffset() { return 0; }
  static constexpr uint64_t AnswersOffset(uint64_t capacity) {
    return FrameMailboxLayout::AreaBytes(capacity);
  }
  // The two areas inside `buffer` (BufferBytes(capacity) long).
  static absl::Span<std::byte> Requests(absl::Span<std::byte> buffer, uint64_t capacity) {
    return buffer.subspan(RequestsOffset(), FrameMailboxLayout::AreaBytes(capacity));
  }
  static absl::Span<std::byte> Answers(absl::Span<std::byte> buffer, uint64_t capacity) {
    return buffer.subspan(AnswersOffset(capacity), FrameMailboxLayout::AreaBytes(capacity));
  }
};

}  // namespace ringsync
