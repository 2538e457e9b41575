// How a ring Frame travels in a gRPC message without copying its payload.
//
// On the wire a frame is an ordinary ringsync.v1.PeerFrame: the header fields, then
// field 15 (payload). The encoder writes the header and the field-15 tag and length
// into one small slice, followed by a slice that points straight at the sender's
// tensor memory; gRPC calls `release` when it no longer reads that memory. The
// decoder parses the header fields and locates the payload inside the received slices,
// which it keeps: the payload is handed on as pieces of them (core/link/payload.h), never
// gathered into a copy.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "core/link/link.h"
#include "daemon/shm/host_identity.h"
#include "daemon/shm/slot_ring.h"
#include "grpcpp/support/byte_buffer.h"

namespace ringsync {

// A hello opens a peer stream: who sends, for which generation; and, when the sender
// offers its same-host path, where it runs and its slot ring (daemon/shm/slot_ring.h).
struct PeerHello {
  int sender_rank = 0;
  uint64_t generation = 0;
  std::string worker_id;
  std::optional<HostIdentity> host = std::nullopt;
  std::optional<SlotRingOffer> shm_offer = std::nullopt;
  int stride = 1;  // 1: the ring link; 2 and up: a stride link (PeerFrame.stride)
  // The sender can send the stream's frames on a data connection (PeerFrame.data_connection).
  bool data_connection = false;
};

// A segment whose payload waits in the sender's slot ring instead of the message.
struct ShmPayloadRef {
  uint64_t slot = 0;
  uint64_t bytes = 0;
};

// `release` runs once gRPC no longer references `payload` (possibly before this returns
// if the payload is empty). REQUIRES: `payload` stays valid and unchanged until then.
grpc::ByteBuffer EncodeFrame(const Frame& frame, absl::Span<const std::byte> payload,
                             std::function<void()> release);
// A frame whose payload is in slot `shm.slot` of the sender's slot ring: header only.
grpc::ByteBuffer EncodeShmFrame(const Frame& frame, const ShmPayloadRef& shm);

grpc::ByteBuffer EncodeHello(const PeerHello& hello);

// The same messages as one contiguous record (a frame mailbox's, daemon/shm/
// frame_mailbox.h), built without gRPC buffers: FrameHead is what EncodeFrame puts
// before the payload (the header, the payload's tag and length), so a record is
// FrameHead(frame, payload.size()) followed by the payload; ShmFrameBytes is
// EncodeShmFrame's whole message.
std::string FrameHead(const Frame& frame, size_t payload_bytes);
std::string ShmFrameBytes(const Frame& frame, const ShmPayloadRef& shm);

// A decoded message is either a hello or a ring frame.
struct DecodedMessage {
  bool is_hello = false;
  PeerHello hello;
  ReceivedFrame frame;
  // Set when the frame's payload is in the sender's slot ring (the frame has none).
  std::optional<ShmPayloadRef> shm;
};

// Validates every header field that can be checked without context (enums, spec).
absl::StatusOr<DecodedMessage> DecodeMessage(const grpc::ByteBuffer& buffer);
// DecodeMessage of a message in one piece, which becomes the payload's storage (the
// payload is read in place, never copied). The header is parsed as sent, so a header
// protobuf itself refuses (a tag over 32 bits, which DecodeMessage's field walk cuts to
// 32 bits and re-writes) is refused here.
absl::StatusOr<DecodedMessage> DecodeRecord(std::vector<std::byte> record);
// DecodeRecord of the `size` bytes at `record`, which becomes the payload's storage.
absl::StatusOr<DecodedMessage> DecodeRecord(std::shared_ptr<const std::byte[]> record, size_t size);

}  // namespace ringsync
