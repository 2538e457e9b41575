// SlotRing: the payload path between two ring neighbours on the same host. The sender
// (left neighbour) owns a sealed memfd of `slot_count` slots of `slot_bytes`; it copies a
// segment's payload into the next free slot and sends only the frame's header, naming the
// slot — through the region's frame mailbox when the receiver took it (frame_mailbox.h),
// else on the gRPC stream. The receiver, which mapped the memfd when it accepted the
// stream's hello, reduces straight from the slot and frees it when done. Order comes from
// where the headers travel; a slot is a place, not a message.
//
// Layout (little-endian, fixed by the sender, checked by the receiver at attach):
//   [0, 64)                      header: magic, slot_count, slot_bytes, 32-byte token
//   [64, 64 + 64 * slot_count)   one state word per slot, a cache line each: 0 free, 1 full
//   [data_offset, +count*bytes)  the slots (data_offset: the state words rounded up to 4 KiB)
//   [mailbox_offset, +area)      when offered with one, the frame mailbox (frame_mailbox.h):
//                                the edge's frames themselves, instead of the gRPC stream
//
// Trust. The offer travels in the hello of a stream the receiver has already
// authenticated (mTLS or cluster token, and the view's sender for that rank). The memfd is
// named ringsync-peer-<token> with a 128-bit random token that only the hello carries, so
// the receiver maps the sender's region and no other memfd that happens to sit at that
// descriptor number; it must be sealed against resizing and fully allocated
// (sealed_mapping.h), so neither side can fault. The receiver bounds every offer field,
// keeps its own copy of the geometry, and checks each frame's slot index and byte count
// against it: a peer cannot make it read outside the mapping. State words are read as
// atomics only; a peer that scribbles on them can only corrupt its own data flow.
//
// Nothing is left behind: a memfd has no name in any directory, and the memory goes with
// the last mapping, whichever process is killed.
//
// Thread-safety: a writer is used by one sending thread; a reader by any threads (each
// slot is taken once per fill).
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "core/sync/wait_limit.h"
#include "daemon/shm/frame_mailbox.h"
#include "daemon/shm/sealed_mapping.h"

namespace ringsync {

// What the sender puts in its hello.
struct SlotRingOffer {
  int64_t pid = 0;  // the sender's pid (same pid namespace: HostIdentity)
  int64_t fd = -1;  // its descriptor of the memfd
  uint64_t region_bytes = 0;
  uint32_t slot_count = 0;
  uint64_t slot_bytes = 0;
  uint64_t mailbox_capacity = 0;  // 0: no frame mailbox
  std::string token;  // 32 lowercase hex digits
};

struct SlotRingGeometry {
  static constexpr uint32_t kMaxSlots = 64;
  static constexpr uint64_t kMinSlotBytes = 4096;
  static constexpr uint64_t kMaxSlotBytes = uint64_t{64} << 20;
  uint32_t slot_count = 0;
  uint64_t slot_bytes = 0;
  uint64_t data_offset = 0;
  uint64_t mailbox_offset = 0;
  uint64_t mailbox_capacity = 0;  // 0: none
  uint64_t region_bytes = 0;

  // InvalidArgument unless 1 <= slot_count <= kMaxSlots, slot_bytes is within bounds and
  // the mailbox capacity is 0 or FrameMailboxLayout::CheckCapacity's.
  static absl::StatusOr<SlotRingGeometry> Of(uint32_t slot_count, uint64_t slot_bytes,
                                             uint64_t mailbox_capacity = 0);
};

class SlotRingWriter {
 public:
  // A fresh sealed memfd with `slot_count` free slots of `slot_bytes`, and an empty frame
  // mailbox of `mailbox_capacity` bytes unless 0.
  static absl::StatusOr<std::unique_ptr<SlotRingWriter>> Create(uint32_t slot_count,
                                                                uint64_t slot_bytes,
                                                                uint64_t mailbox_capacity = 0);
  SlotRingWriter(const SlotRingWriter&) = delete;
  SlotRingWriter& operator=(const SlotRingWriter&) = delete;
  ~SlotRingWriter();

  const SlotRingOffer& offer() const { return offer_; }
  uint64_t slot_bytes() const { return geometry_.slot_bytes; }
  // The frame mailbox to the receiver, or null when the ring has none.
  FrameMailboxWriter* mailbox() { return mailbox_.get(); }

  // Copies `payload` (at most slot_bytes()) into the next slot once the receiver has freed
  // it, and marks it full; returns its index. DeadlineExceeded or Cancelled per `limit`;
  // Unavailable as soon as `gone()` says the receiver cannot free it any more.
  absl::StatusOr<uint32_t> Put(absl::Span<const std::byte> payload, const WaitLimit& limit,
                               const std::function<bool()>& gone);
  // Frees slot `slot` that Put filled but whose header was never sent (so the receiver
  // cannot take it); without this the ring would wait on it forever when it comes round.
  void Unput(uint32_t slot);

 private:
  SlotRingWriter(int fd, std::byte* base, SlotRingGeometry geometry, SlotRingOffer offer);

  const int fd_;
  std::byte* const base_;
  const SlotRingGeometry geometry_;
  const SlotRingOffer offer_;
  uint32_t next_ = 0;
  std::unique_ptr<FrameMailboxWriter> mailbox_;
};

class SlotRingReader : public std::enable_shared_from_this<SlotRingReader> {
 public:
  // Maps the region `offer` describes, owned by `uid`, after checking every field (see
  // above). InvalidArgument/PermissionDenied/FailedPrecondition naming the failed check.
  static absl::StatusOr<std::shared_ptr<SlotRingReader>> Attach(const SlotRingOffer& offer,
                                                                uid_t uid);

  // Slot `slot`'s first `bytes` bytes, which the sender has filled, and a handle that frees
  // the slot when the last copy of it is dropped (the payload is valid until then).
  // InvalidArgument for a slot or size outside the geometry, or a slot not full.
  struct Payload {
    absl::Span<const std::byte> bytes;
    std::shared_ptr<const void> storage;
  };
  absl::StatusOr<Payload> Take(uint64_t slot, uint64_t bytes);

  // The frame mailbox from the sender, or null when its ring has none. Valid while this
  // reader lives.
  FrameMailboxReader* mailbox() { return mailbox_.get(); }

 private:
  SlotRingReader(std::shared_ptr<SealedMapping> mapping, SlotRingGeometry geometry);
  void Free(uint32_t slot);

  const std::shared_ptr<SealedMapping> mapping_;
  const SlotRingGeometry geometry_;  // the receiver's own copy: never re-read from the region
  std::unique_ptr<FrameMailboxReader> mailbox_;
};

}  // namespace ringsync
