// ArrivalMarks: how a client tells its worker which blocks of a tensor it has copied into
// registered memory so far, in memory both map (the worker's side of
// core/ring/input_arrival.h).
//
// Layout, at CollectiveRequest.registered.arrival.marks_offset of the tensor's buffer
// (4-byte aligned, outside the tensor), uint32 words: the count of blocks marked so far (a
// futex word); the block the worker waits for, plus one (0: none), which the worker
// writes; then one word per block: 0 until the block's bytes are in, non-zero after.
// Blocks are arrival.block_bytes long, the last one shorter. The client wakes the count's
// waiters only when it marks the block the worker waits for, so a worker that needs a
// later block sleeps through the marks before it. One thread waits at a time (the ring's
// receiving thread); another's wake-ups would come as late as its wait's slices.
//
// Order: the client zeroes the marks before it sends the request and writes each mark
// (release) after the block's bytes; the worker reads marks with acquire, so once it sees
// a block marked it sees the block's bytes. The client writes no block twice.
//
// The client is not trusted: the worker writes only the awaited-block word, bounds every
// index by the layout it validated, and waits for marks no longer than the collective's
// limit.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "core/ring/input_arrival.h"
#include "core/sync/wait_limit.h"

namespace ringsync {

// Bounds the worker holds a request to: blocks of at least 64 KiB, at most 4,096 of them
// (16 KiB of marks).
inline constexpr uint64_t kMinArrivalBlockBytes = uint64_t{64} << 10;
inline constexpr uint64_t kMaxArrivalBlocks = 4096;

struct ArrivalLayout {
  uint64_t tensor_offset = 0;  // the tensor: [tensor_offset, + tensor_bytes) of the buffer
  uint64_t tensor_bytes = 0;
  uint64_t block_bytes = 0;
  uint64_t marks_offset = 0;

  uint64_t blocks() const {
    return block_bytes == 0 ? 0 : tensor_bytes / block_bytes + (tensor_bytes % block_bytes != 0);
  }
  uint64_t marks_bytes() const { return sizeof(uint32_t) * (2 + blocks()); }
};

// The layout a client uses for a tensor of `tensor_bytes` at the start of a buffer: blocks
// of max(1 MiB, tensor_bytes / 1024) rounded up to 4 KiB, the marks after the tensor
// (64-byte aligned). The buffer must hold ArrivalBufferBytes(tensor_bytes).
ArrivalLayout ClientArrivalLayout(uint64_t tensor_bytes);
uint64_t ArrivalBufferBytes(uint64_t tensor_bytes);

// InvalidArgument naming the field unless the layout fits a buffer of `buffer_bytes`: the
// tensor inside it, block size and count within bounds, the marks aligned, inside the
// buffer and clear of the tensor.
absl::Status ValidateArrivalLayout(const ArrivalLayout& layout, uint64_t buffer_bytes);

// The client's side: marks blocks as their bytes land. `marks` points at the layout's
// marks in the client's mapping of the buffer.
class ArrivalMarker {
 public:
  ArrivalMarker(std::byte* marks, uint64_t blocks) : marks_(marks), blocks_(blocks) {}

  // Every block unmarked, the count 0: before the request names the marks.
  void Reset();
  // Block `block`'s bytes are in; wakes the worker if it waits for them.
  void Mark(uint64_t block);

 private:
  std::byte* const marks_;
  const uint64_t blocks_;
};

// The worker's side: an InputArrival over the marks in its mapping of the buffer, which
// `keep_mapped` keeps alive. Thread-safe.
class ArrivalMarks : public InputArrival {
 public:
  ArrivalMarks(const std::byte* marks, const ArrivalLayout& layout,
               std::shared_ptr<const void> keep_mapped)
      : marks_(marks), layout_(layout), keep_mapped_(std::move(keep_mapped)) {}

  // Offsets are the tensor's (0 is its first byte). Waits on the count word in slices of
  // at most 20 ms, so a cancellation is seen even if the client never wakes it. Writes
  // the awaited-block word (the only write to the marks).
  absl::Status AwaitBytes(size_t offset, size_t size, const WaitLimit& limit) const override;

 private:
  const std::byte* const marks_;
  const ArrivalLayout layout_;
  const std::shared_ptr<const void> keep_mapped_;
};

}  // namespace ringsync
