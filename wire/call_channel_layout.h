// Where the two mailboxes of a call channel (worker.proto, OpenCallChannel) lie in the
// registered buffer that holds them: the client's requests, then the worker's answers,
// each a frame mailbox area (daemon/shm/frame_mailbox.h) of the same capacity.
#pragma once

#include <cstdint>

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
};

}  // namespace ringsync
