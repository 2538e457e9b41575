#include "daemon/shm/arrival_marks.h"

#include <algorithm>
#include <atomic>

#include "absl/strings/str_cat.h"
#include "daemon/shm/shared_futex.h"

namespace ringsync {
namespace {

// A worker waiting for marks looks at its limit at least this often.
constexpr absl::Duration kMarkWaitSlice = absl::Milliseconds(20);

uint64_t RoundUp(uint64_t value, uint64_t to) { return (value + to - 1) / to * to; }

constexpr uint64_t kCountWord = 0;
constexpr uint64_t kAwaitedWord = 1;
constexpr uint64_t kFirstMark = 2;

// A client's blocks: at least a ring segment (1 MiB by default), so that the worker, which
// reads segment by segment, sleeps at most about once per segment.
constexpr uint64_t kClientBlockBytes = uint64_t{1} << 20;

// Word `i` of the marks: kCountWord, kAwaitedWord, then kFirstMark + b for block b. Not
// const: the worker writes the awaited word, and futex calls take a plain pointer.
std::atomic<uint32_t>* Word(const std::byte* marks, uint64_t i) {
  static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t));
  return reinterpret_cast<std::atomic<uint32_t>*>(const_cast<std::byte*>(marks) +
                                                  i * sizeof(uint32_t));
}

}  // namespace

ArrivalLayout ClientArrivalLayout(uint64_t tensor_bytes) {
  ArrivalLayout layout;
  layout.tensor_bytes = tensor_bytes;
  layout.block_bytes =
      std::max(kClientBlockBytes, RoundUp((tensor_bytes + 1023) / 1024, 4096));
  layout.marks_offset = RoundUp(tensor_bytes, 64);
  return layout;
}

uint64_t ArrivalBufferBytes(uint64_t tensor_bytes) {
  const ArrivalLayout layout = ClientArrivalLayout(tensor_bytes);
  return layout.marks_offset + layout.marks_bytes();
}

absl::Status ValidateArrivalLayout(const ArrivalLayout& layout, uint64_t buffer_bytes) {
  auto invalid = [](absl::string_view field, absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("registered.arrival.", field, ": ", why));
  };
  if (layout.tensor_offset > buffer_bytes || layout.tensor_bytes > buffer_bytes - layout.tensor_offset) {
    return invalid("size_bytes", absl::StrCat("the tensor's ", layout.tensor_bytes, " bytes at ",
                                              layout.tensor_offset, " do not fit the buffer's ",
                                              buffer_bytes));
  }
  if (layout.block_bytes < kMinArrivalBlockBytes) {
    return invalid("block_bytes", absl::StrCat(layout.block_bytes, " is below the least, ",
                                               kMinArrivalBlockBytes));
  }
  if (layout.blocks() > kMaxArrivalBlocks) {
    return invalid("block_bytes",
                   absl::StrCat(layout.blocks(), " blocks of ", layout.block_bytes, " for ",
                                layout.tensor_bytes, " bytes; at most ", kMaxArrivalBlocks));
  }
  if (layout.marks_offset % sizeof(uint32_t) != 0) {
    return invalid("marks_offset", absl::StrCat(layout.marks_offset, " is not 4-byte aligned"));
  }
  const uint64_t marks_end = layout.marks_offset + layout.marks_bytes();
  if (layout.marks_offset > buffer_bytes || marks_end > buffer_bytes) {
    return invalid("marks_offset",
                   absl::StrCat(layout.marks_bytes(), " bytes of marks at ", layout.marks_offset,
                                " do not fit the buffer's ", buffer_bytes));
  }
  const uint64_t tensor_end = layout.tensor_offset + layout.tensor_bytes;
  if (layout.marks_offset < tensor_end && layout.tensor_offset < marks_end) {
    return invalid("marks_offset", absl::StrCat("the marks [", layout.marks_offset, ", ", marks_end,
                                                ") overlap the tensor [", layout.tensor_offset,
                                                ", ", tensor_end, ")"));
  }
  return absl::OkStatus();
}

void ArrivalMarker::Reset() {
  for (uint64_t i = 0; i < kFirstMark + blocks_; ++i) {
    Word(marks_, i)->store(0, std::memory_order_relaxed);
  }
}

void ArrivalMarker::Mark(uint64_t block) {
  // Sequentially consistent with the worker's store of the awaited block and its load of
  // the mark: either it sees this mark before it sleeps, or this sees it waits for it.
  Word(marks_, kFirstMark + block)->store(1, std::memory_order_seq_cst);
  Word(marks_, kCountWord)->fetch_add(1, std::memory_order_release);
  if (Word(marks_, kAwaitedWord)->load(std::memory_order_seq_cst) == block + 1) {
    SharedFutexWake(Word(marks_, kCountWord));
  }
}

absl::Status ArrivalMarks::AwaitBytes(size_t offset, size_t size, const WaitLimit& limit) const {
  if (size == 0) return absl::OkStatus();
  if (offset > layout_.tensor_bytes || size > layout_.tensor_bytes - offset) {
    return absl::InternalError(absl::StrCat("bytes [", offset, ", ", offset + size,
                                            ") lie outside the ", layout_.tensor_bytes,
                                            "-byte tensor"));
  }
  const uint64_t last = (offset + size - 1) / layout_.block_bytes;
  uint64_t next = offset / layout_.block_bytes;  // the first block not yet seen marked
  while (true) {
    // The count before the marks: a mark made after this load changes it, so the wait
    // below returns at once instead of missing the wake-up.
    const uint32_t count = Word(marks_, kCountWord)->load(std::memory_order_acquire);
    while (next <= last &&
           Word(marks_, kFirstMark + next)->load(std::memory_order_acquire) != 0) {
      ++next;
    }
    if (next > last) return absl::OkStatus();
    const std::string missing = absl::StrCat(
        "block ", next, " of ", layout_.blocks(), " (bytes from ", next * layout_.block_bytes,
        " of ", layout_.tensor_bytes, ") of the client's input");
    if (limit.IsCancelled()) {
      return absl::CancelledError(absl::StrCat("cancelled while waiting for ", missing));
    }
    if (limit.deadline.Passed()) {
      return absl::DeadlineExceededError(absl::StrCat(
          "the client's input did not arrive in time: ", missing,
          " was never copied in (is the training process stalled or gone?)"));
    }
    // Tell the client which mark to wake this thread for, then look at that mark once
    // more (see Mark) before sleeping.
    Word(marks_, kAwaitedWord)->store(next + 1, std::memory_order_seq_cst);
    if (Word(marks_, kFirstMark + next)->load(std::memory_order_seq_cst) != 0) continue;
    SharedFutexWait(Word(marks_, kCountWord), count,
                    std::min(kMarkWaitSlice, limit.deadline.Left()));
  }
}

}  // namespace ringsync
