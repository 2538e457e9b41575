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

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "core/link/link.h"
#include "grpcpp/support/byte_buffer.h"

namespace ringsync {

// A hello opens a peer stream: who sends, for which generation.
struct PeerHello {
  int sender_rank = 0;
  uint64_t generation = 0;
  std::string worker_id;
};

// `release` runs once gRPC no longer references `payload` (possibly before this returns
// if the payload is empty). REQUIRES: `payload` stays valid and unchanged until then.
grpc::ByteBuffer EncodeFrame(const Frame& frame, absl::Span<const std::byte> payload,
                             std::function<void()> release);

grpc::ByteBuffer EncodeHello(const PeerHello& hello);

// A decoded message is either a hello or a ring frame.
struct DecodedMessage {
  bool is_hello = false;
  PeerHello hello;
  ReceivedFrame frame;
};

// Validates every header field that can be checked without context (enums, spec).
absl::StatusOr<DecodedMessage> DecodeMessage(const grpc::ByteBuffer& buffer);

}  // namespace ringsync
