#include "daemon/shm/frame_mailbox.h"

#include <sched.h>

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "core/sync/steady_deadline.h"
#include "daemon/shm/shared_futex.h"

namespace ringsync {
namespace {

constexpr uint64_t kWritePosOffset = 0;
constexpr uint64_t kReadPosOffset = 64;
constexpr uint64_t kDoorbellOffset = 128;
constexpr uint64_t kSleepingOffset = 132;
constexpr uint64_t kSpaceBellOffset = 192;
constexpr uint64_t kWriterSleepingOffset = 196;
constexpr uint32_t kLapEnd = 0xffffffffu;
constexpr uint64_t kLengthBytes = 4;
// How long one futex sleep lasts before the limit and `gone` are looked at again.
constexpr absl::Duration kWaitSlice = absl::Milliseconds(5);

std::atomic<uint64_t>* Position(std::byte* base, uint64_t offset) {
  return reinterpret_cast<std::atomic<uint64_t>*>(base + offset);
}
std::atomic<uint32_t>* Word(std::byte* base, uint64_t offset) {
  return reinterpret_cast<std::atomic<uint32_t>*>(base + offset);
}
uint64_t RecordBytes(uint64_t length) { return (kLengthBytes + length + 7) / 8 * 8; }

}  // namespace

absl::Status FrameMailboxLayout::CheckCapacity(uint64_t capacity) {
  if (capacity < kMinCapacity || capacity > kMaxCapacity || capacity % 8 != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a frame mailbox of ", capacity, " bytes: ", kMinCapacity, "..", kMaxCapacity,
        ", a multiple of 8, allowed"));
  }
  return absl::OkStatus();
}

FrameMailboxWriter::FrameMailboxWriter(absl::Span<std::byte> area, uint64_t capacity)
    : base_(area.data()), capacity_(capacity) {}

absl::Status FrameMailboxWriter::Put(absl::Span<const absl::Span<const std::byte>> pieces,
                                     const WaitLimit& limit, const std::function<bool()>& gone,
                                     bool urgent) {
  uint64_t length = 0;
  for (absl::Span<const std::byte> piece : pieces) length += piece.size();
  if (length > max_record_bytes()) {
    return absl::InvalidArgumentError(absl::StrCat("a message of ", length,
                                                   " bytes does not fit a frame mailbox of ",
                                                   capacity_, " bytes"));
  }
  const uint64_t at = write_ % capacity_;
  // A record never wraps: when it does not fit before the lap's end, the rest is skipped.
  const uint64_t skip = at + RecordBytes(length) > capacity_ ? capacity_ - at : 0;
  const uint64_t needed = skip + RecordBytes(length);
  const uint64_t keep_free = urgent ? 0 : FrameMailboxLayout::ReserveBytes(capacity_);
  std::atomic<uint32_t>* space_bell = Word(base_, kSpaceBellOffset);
  std::atomic<uint32_t>* sleeping = Word(base_, kWriterSleepingOffset);
  while (true) {
    // Paired with the reader's "position, then is the writer sleeping?".
    sleeping->store(1, std::memory_order_seq_cst);
    const uint32_t bell = space_bell->load(std::memory_order_seq_cst);
    const uint64_t read = Position(base_, kReadPosOffset)->load(std::memory_order_seq_cst);
    // A reader whose position is not behind ours is lying or broken: wait as if full.
    if (read <= write_ && write_ - read <= capacity_ &&
        capacity_ - (write_ - read) >= needed + keep_free) {
      sleeping->store(0, std::memory_order_relaxed);
      break;
    }
    absl::Status stop;
    if (limit.IsCancelled()) {
      stop = absl::CancelledError("waiting for room in the frame mailbox");
    } else if (gone()) {
      stop = absl::UnavailableError("the receiver's stream ended");
    } else if (limit.deadline.Passed()) {
      stop = absl::DeadlineExceededError("waiting for the receiver to take its frames");
    }
    if (!stop.ok()) {
      sleeping->store(0, std::memory_order_relaxed);
      return stop;
    }
    const absl::Duration left = limit.deadline.Left();
    SharedFutexWait(space_bell, bell, std::min(left, kWaitSlice));
  }
  std::byte* data = base_ + FrameMailboxLayout::kControlBytes;
  if (skip > 0) {
    const uint32_t lap_end = kLapEnd;
    std::memcpy(data + at, &lap_end, kLengthBytes);
  }
  std::byte* record = data + (write_ + skip) % capacity_;
  const auto length32 = static_cast<uint32_t>(length);
  std::memcpy(record, &length32, kLengthBytes);
  std::byte* to = record + kLengthBytes;
  for (absl::Span<const std::byte> piece : pieces) {
    if (!piece.empty()) std::memcpy(to, piece.data(), piece.size());
    to += piece.size();
  }
  write_ += needed;
  Position(base_, kWritePosOffset)->store(write_, std::memory_order_seq_cst);
  Word(base_, kDoorbellOffset)->fetch_add(1, std::memory_order_seq_cst);
  // Paired with the reader's "sleeping, then look again": either it sees this record or
  // this sees it sleeping.
  if (Word(base_, kSleepingOffset)->load(std::memory_order_seq_cst) != 0) {
    SharedFutexWake(Word(base_, kDoorbellOffset));
  }
  return absl::OkStatus();
}

FrameMailboxReader::FrameMailboxReader(absl::Span<std::byte> area, uint64_t capacity)
    : base_(area.data()), capacity_(capacity) {}

absl::StatusOr<std::optional<std::vector<std::byte>>> FrameMailboxReader::TryTake() {
  std::vector<std::byte> record;
  absl::StatusOr<bool> taken = TryTakeInto(record);
  if (!taken.ok()) return taken.status();
  if (!*taken) return std::nullopt;
  return record;
}

absl::StatusOr<bool> FrameMailboxReader::TryTakeInto(std::vector<std::byte>& record) {
  const std::byte* data = base_ + FrameMailboxLayout::kControlBytes;
  while (true) {
    const uint64_t written = Position(base_, kWritePosOffset)->load(std::memory_order_acquire);
    if (written == read_) return false;
    if (written < read_ || written - read_ > capacity_ || written % 8 != 0) {
      return absl::DataLossError(absl::StrCat("frame mailbox: the writer's position ", written,
                                              " is impossible after ", read_));
    }
    const uint64_t at = read_ % capacity_;
    uint32_t length = 0;
    std::memcpy(&length, data + at, kLengthBytes);
    if (length == kLapEnd) {
      read_ += capacity_ - at;
      continue;
    }
    if (length > FrameMailboxLayout::MaxRecordBytes(capacity_) ||
        at + RecordBytes(length) > capacity_ || RecordBytes(length) > written - read_) {
      return absl::DataLossError(absl::StrCat("frame mailbox: a record of ", length,
                                              " bytes at ", read_, " overruns what was written"));
    }
    record.assign(data + at + kLengthBytes, data + at + kLengthBytes + length);
    read_ += RecordBytes(length);
    Position(base_, kReadPosOffset)->store(read_, std::memory_order_seq_cst);
    std::atomic<uint32_t>* space_bell = Word(base_, kSpaceBellOffset);
    space_bell->fetch_add(1, std::memory_order_seq_cst);
    if (Word(base_, kWriterSleepingOffset)->load(std::memory_order_seq_cst) != 0) {
      SharedFutexWake(space_bell);
    }
    return true;
  }
}

uint32_t FrameMailboxReader::doorbell() const {
  return Word(base_, kDoorbellOffset)->load(std::memory_order_acquire);
}

void FrameMailboxReader::Wait(uint32_t seen, absl::Duration max_wait, absl::Duration spin) {
  std::atomic<uint32_t>* doorbell = Word(base_, kDoorbellOffset);
  if (spin > absl::ZeroDuration()) {
    const SteadyDeadline until(std::min(max_wait, spin));
    while (doorbell->load(std::memory_order_acquire) == seen && !until.Passed()) {
      sched_yield();
    }
    if (doorbell->load(std::memory_order_acquire) != seen) return;
    max_wait -= std::min(max_wait, spin);
    if (max_wait <= absl::ZeroDuration()) return;
  }
  std::atomic<uint32_t>* sleeping = Word(base_, kSleepingOffset);
  sleeping->store(1, std::memory_order_seq_cst);
  if (doorbell->load(std::memory_order_seq_cst) == seen) SharedFutexWait(doorbell, seen, max_wait);
  sleeping->store(0, std::memory_order_relaxed);
}

absl::StatusOr<std::optional<std::vector<std::byte>>> FrameMailboxReader::TakeOrWait(
    absl::Duration max_wait, absl::Duration spin) {
  std::vector<std::byte> record;
  absl::StatusOr<bool> taken = TakeOrWaitInto(record, max_wait, spin);
  if (!taken.ok()) return taken.status();
  if (!*taken) return std::nullopt;
  return record;
}

absl::StatusOr<bool> FrameMailboxReader::TakeOrWaitInto(std::vector<std::byte>& record,
                                                        absl::Duration max_wait,
                                                        absl::Duration spin) {
  const uint32_t seen = doorbell();
  absl::StatusOr<bool> taken = TryTakeInto(record);
  if (!taken.ok() || *taken) {
    idle_ = false;
    return taken;
  }
  Wait(seen, max_wait, idle_ ? absl::ZeroDuration() : spin);
  idle_ = doorbell() == seen;
  return false;
}

void FrameMailboxReader::Ring() {
  Word(base_, kDoorbellOffset)->fetch_add(1, std::memory_order_seq_cst);
  SharedFutexWake(Word(base_, kDoorbellOffset));
}

}  // namespace ringsync
