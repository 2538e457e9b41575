// FrameMailbox: ordered messages from one process to another on the same host through
// shared memory — how a ring edge's frames (headers, small payloads) travel between two
// same-host workers without gRPC. A message costs two copies and, when the receiver is
// asleep, one futex wake: no socket, no HTTP/2, no gRPC thread hand-offs (a 4-byte
// all-reduce's hop over gRPC woke three to four threads per frame on each side).
//
// The mailbox is an area inside the sender's sealed memfd (slot_ring.h), a
// single-producer single-consumer ring of variable-length records:
//   [0, 8)        write position: bytes ever appended (the writer's; 8-aligned)
//   [64, 72)      read position: bytes ever consumed (the reader's)
//   [128, 132)    doorbell: bumped after every append (and by the reader's own process to
//                 wake its own waiter); the reader sleeps on it
//   [132, 136)    1 while the reader sleeps or is about to (the writer skips the wake
//                 syscall otherwise)
//   [192, 196)    space bell: bumped after every take; a writer waiting for room sleeps on it
//   [256, 256 + capacity)  records: a 4-byte length, the bytes, padding to 8; a record never
//                 wraps — a length of 0xffffffff says "the rest of this lap is unused"
//
// Trust. The reader never trusts what it reads from the area: it keeps its own read
// position, checks the writer's position and every length against its own copy of the
// capacity, and copies a record out before anything looks at it, so a writer that
// scribbles can only make the reader fail (DataLoss) — never read outside the area, nor
// see bytes change under it. The writer writes only inside the area; a reader that lies
// about its position can only spoil its own messages.
//
// Thread-safety: one thread puts at a time; one thread takes at a time; Ring and
// doorbell from any thread.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "core/sync/wait_limit.h"

namespace ringsync {

struct FrameMailboxLayout {
  static constexpr uint64_t kControlBytes = 256;
  static constexpr uint64_t kMinCapacity = 4096;
  static constexpr uint64_t kMaxCapacity = uint64_t{64} << 20;
  // The area a mailbox of `capacity` record bytes occupies.
  static constexpr uint64_t AreaBytes(uint64_t capacity) { return kControlBytes + capacity; }
  // InvalidArgument unless kMinCapacity <= capacity <= kMaxCapacity, a multiple of 8.
  static absl::Status CheckCapacity(uint64_t capacity);
  // Bytes at the end kept for urgent records (a failure's notice): a receiver that
  // stopped reading — its collective failed — still gets told why its sender failed.
  static constexpr uint64_t ReserveBytes(uint64_t capacity) {
    return capacity / 8 < 8192 ? capacity / 8 : 8192;
  }
  // The largest record a mailbox of `capacity` takes: half of what is not reserved (less
  // its length word), so a record always fits once the reader caught up, wherever the
  // lap stands.
  static constexpr uint64_t MaxRecordBytes(uint64_t capacity) {
    return (capacity - ReserveBytes(capacity)) / 2 / 8 * 8 - 8;
  }
};

class FrameMailboxWriter {
 public:
  // `area`: FrameMailboxLayout::AreaBytes(capacity) zeroed bytes shared with the reader.
  // REQUIRES: CheckCapacity(capacity) is OK.
  FrameMailboxWriter(absl::Span<std::byte> area, uint64_t capacity);

  uint64_t max_record_bytes() const { return FrameMailboxLayout::MaxRecordBytes(capacity_); }

  // Appends one record, the concatenation of `pieces`, once the reader has made room, and
  // wakes the reader; an `urgent` one may use the reserve. InvalidArgument for a record
  // over max_record_bytes(); DeadlineExceeded or Cancelled per `limit`; Unavailable as
  // soon as `gone()` says the reader will not take any more.
  absl::Status Put(absl::Span<const absl::Span<const std::byte>> pieces, const WaitLimit& limit,
                   const std::function<bool()>& gone, bool urgent = false);

 private:
  std::byte* const base_;
  const uint64_t capacity_;
  uint64_t write_ = 0;  // the writer's own position; the area's copy is only published
};

class FrameMailboxReader {
 public:
  // `area` as the writer's, mapped here; `capacity` from the reader's own checked geometry.
  FrameMailboxReader(absl::Span<std::byte> area, uint64_t capacity);

  // The next record, copied out; nullopt when none waits. DataLoss when the area holds
  // what no writer of this layout writes (the mailbox is then unusable).
  absl::StatusOr<std::optional<std::vector<std::byte>>> TryTake();
  // TryTake into `record` (whose capacity is reused, so a reader of large records does not
  // allocate, and fault in, fresh memory for each); false when none waits.
  absl::StatusOr<bool> TryTakeInto(std::vector<std::byte>& record);

  // Changes with every record appended and every Ring(): read it, look for records, and
  // if there were none sleep with Wait(seen) — a record appended in between ends the wait.
  uint32_t doorbell() const;
  // Sleeps until the doorbell differs from `seen`, at most `max_wait`. For the first
  // `spin` of it, it keeps looking instead, yielding the CPU between looks: a record that
  // comes within it costs no futex sleep and wake-up (on a loaded VM ~30-40 µs each), at
  // the price of that thread staying runnable (other runnable threads go first).
  void Wait(uint32_t seen, absl::Duration max_wait, absl::Duration spin = absl::ZeroDuration());
  // Bumps the doorbell and wakes its sleeper: for the reader's own process, when
  // something else the sleeper waits for happened (a frame by another path, a close).
  void Ring();

  // For a thread that does nothing but take records: the next record, or nullopt after
  // one Wait of at most `max_wait` that brought none (the caller looks at its stop
  // request and calls again). It spins (`spin`) only while records keep coming: after a
  // wait that nothing ended, the next one sleeps at once. Errors as TryTake.
  absl::StatusOr<std::optional<std::vector<std::byte>>> TakeOrWait(absl::Duration max_wait,
                                                                   absl::Duration spin);
  // TakeOrWait into `record`, as TryTakeInto.
  absl::StatusOr<bool> TakeOrWaitInto(std::vector<std::byte>& record, absl::Duration max_wait,
                                      absl::Duration spin);

 private:
  std::byte* const base_;
  const uint64_t capacity_;
  uint64_t read_ = 0;  // the reader's own position; never read back from the area
  bool idle_ = false;   // TakeOrWait's last wait ended with nothing new
};

}  // namespace ringsync
