// Fuzzes DecodeMessage, the first code to read the bytes a peer sends on a ring stream.
//
// Input: one byte that says how the message is cut into gRPC slices (a payload split
// across slices takes the decoder's gathering path), then the message itself.
// Beyond "no crash, no sanitizer report", two properties:
//  * the decoder agrees with protobuf: a message both accept has the same header fields
//    and payload in both. (Each refuses some messages the other accepts: the decoder a
//    second payload field, protobuf a varint tag or length longer than 5 bytes, which
//    CodedInputStream cuts to 32 bits. The latter is harmless, as the sender may write
//    any field value anyway.)
//  * a decoded frame or hello, encoded again, decodes to the same thing.
//  * the same bytes as one mailbox record (DecodeRecord, which parses them in place)
//    decode to the same status, header fields and payload as the sliced message — or,
//    for a message protobuf refuses, the record is refused where the stream's decoder
//    (which re-writes each header field before parsing) accepted it.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "daemon/logging/sanitized_text.h"
#include "daemon/transport/grpc/frame_codec.h"
#include "fuzz/fuzz_check.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/slice.h"
#include "ringsync/v1/peer.pb.h"
#include "wire/proto_convert.h"

namespace ringsync {
namespace {

// `message` in 1 to 4 slices: `cuts` % 4 + 1 of them, the first `cuts` / 4 bytes long,
// the rest of equal size.
grpc::ByteBuffer Sliced(const uint8_t* message, size_t size, uint8_t cuts) {
  const size_t pieces = cuts % 4 + 1;
  std::vector<grpc::Slice> slices;
  size_t at = 0;
  if (pieces > 1) {
    const size_t first = std::min<size_t>(size, cuts / 4);
    slices.emplace_back(message, first);
    at = first;
  }
  const size_t rest = pieces > 1 ? pieces - 1 : 1;
  const size_t each = (size - at + rest - 1) / rest;
  while (at < size) {
    const size_t length = std::min(each, size - at);
    slices.emplace_back(message + at, length);
    at += length;
  }
  if (slices.empty()) slices.emplace_back();
  return grpc::ByteBuffer(slices.data(), slices.size());
}

// A spec as its wire bytes: equal specs compare equal even when a scale is NaN (which
// ValidateSpec allows where scales do not apply).
std::string SpecBytes(const std::optional<CollectiveSpec>& spec) {
  if (!spec.has_value()) return "none";
  v1::CollectiveSpec proto;
  ToProto(*spec, &proto);
  return proto.SerializeAsString();
}

std::string Bytes(const Payload& payload) {
  const std::vector<std::byte> bytes = payload.ToVector();
  return std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

void CheckAgreesWithProtobuf(const DecodedMessage& decoded, const uint8_t* message, size_t size) {
  v1::PeerFrame parsed;
  if (!parsed.ParseFromArray(message, static_cast<int>(size))) return;
  if (decoded.is_hello) {
    FUZZ_CHECK(parsed.kind() == v1::FRAME_KIND_HELLO);
    FUZZ_CHECK(decoded.hello.sender_rank == parsed.sender_rank());
    FUZZ_CHECK(decoded.hello.generation == parsed.generation());
    FUZZ_CHECK(decoded.hello.worker_id == parsed.sender_worker_id());
    return;
  }
  const Frame& frame = decoded.frame.frame;
  FUZZ_CHECK(frame.sender_rank == parsed.sender_rank());
  FUZZ_CHECK(frame.generation == parsed.generation());
  FUZZ_CHECK(frame.sequence == parsed.sequence());
  FUZZ_CHECK(frame.step == parsed.step());
  FUZZ_CHECK(frame.segment == parsed.segment());
  FUZZ_CHECK(frame.chunk == parsed.chunk());
  FUZZ_CHECK(frame.offset == parsed.offset());
  FUZZ_CHECK(frame.count == parsed.count());
  FUZZ_CHECK(frame.abort_origin == parsed.abort_origin());
  // A peer's words reach logs as one bounded line (SanitizeText), never verbatim.
  FUZZ_CHECK(frame.abort_reason == SanitizeText(parsed.abort_reason(), kMaxAbortReasonBytes));
  FUZZ_CHECK(frame.abort_before_commit == parsed.abort_before_commit());
  FUZZ_CHECK(frame.spec.has_value() == parsed.has_spec());
  FUZZ_CHECK(Bytes(decoded.frame.payload) == parsed.payload());
}

// The same hello, as far as a hello carries it.
void CheckSameHello(const PeerHello& a, const PeerHello& b) {
  FUZZ_CHECK(a.sender_rank == b.sender_rank);
  FUZZ_CHECK(a.generation == b.generation);
  FUZZ_CHECK(a.worker_id == b.worker_id);
}

// The same header fields every frame carries.
void CheckSameHeader(const Frame& a, const Frame& b) {
  FUZZ_CHECK(a.kind == b.kind);
  FUZZ_CHECK(a.sender_rank == b.sender_rank);
  FUZZ_CHECK(a.generation == b.generation);
  FUZZ_CHECK(a.sequence == b.sequence);
  FUZZ_CHECK(a.step == b.step);
  FUZZ_CHECK(a.segment == b.segment);
  FUZZ_CHECK(a.chunk == b.chunk);
  FUZZ_CHECK(a.offset == b.offset);
  FUZZ_CHECK(a.count == b.count);
  FUZZ_CHECK(SpecBytes(a.spec) == SpecBytes(b.spec));
}

// The same abort fields.
void CheckSameAbort(const Frame& a, const Frame& b) {
  FUZZ_CHECK(a.abort_origin == b.abort_origin);
  FUZZ_CHECK(a.abort_reason == b.abort_reason);
  FUZZ_CHECK(a.abort_before_commit == b.abort_before_commit);
}

void CheckRoundTrip(const DecodedMessage& decoded) {
  if (decoded.is_hello) {
    absl::StatusOr<DecodedMessage> again = DecodeMessage(EncodeHello(decoded.hello));
    FUZZ_CHECK(again.ok() && again->is_hello);
    CheckSameHello(again->hello, decoded.hello);
    return;
  }
  const Frame& frame = decoded.frame.frame;
  bool released = false;
  absl::StatusOr<DecodedMessage> again;
  const std::vector<std::byte> payload = decoded.frame.payload.ToVector();
  {
    grpc::ByteBuffer encoded = EncodeFrame(frame, payload, [&] { released = true; });
    again = DecodeMessage(encoded);
  }
  FUZZ_CHECK(again.ok() && !again->is_hello);
  const Frame& copy = again->frame.frame;
  CheckSameHeader(copy, frame);
  // Only abort frames carry these on the wire.
  if (frame.kind == FrameKind::kAbort) CheckSameAbort(copy, frame);
  FUZZ_CHECK(Bytes(again->frame.payload) == Bytes(decoded.frame.payload));
  again = absl::UnknownError("dropped");  // the last reference to the encoded payload
  FUZZ_CHECK(released || decoded.frame.payload.empty());
}

void CheckRecordAgrees(const absl::StatusOr<DecodedMessage>& streamed, const uint8_t* message,
                       size_t size) {
  const auto* begin = reinterpret_cast<const std::byte*>(message);
  const absl::StatusOr<DecodedMessage> recorded =
      DecodeRecord(std::vector<std::byte>(begin, begin + size));
  if (!streamed.ok() || !recorded.ok()) {
    if (recorded.status() == streamed.status()) return;
    // They part only where the stream's walk re-wrote a field protobuf itself refuses (a
    // tag over 32 bits, which CodedInputStream cuts): the record's header is parsed as
    // sent, so it is refused, perhaps for another reason.
    FUZZ_CHECK(!recorded.ok());
    v1::PeerFrame parsed;
    FUZZ_CHECK(!parsed.ParseFromArray(message, static_cast<int>(size)));
    return;
  }
  FUZZ_CHECK(recorded->is_hello == streamed->is_hello);
  if (streamed->is_hello) {
    CheckSameHello(recorded->hello, streamed->hello);
    FUZZ_CHECK(recorded->hello.stride == streamed->hello.stride);
    FUZZ_CHECK(recorded->hello.shm_offer.has_value() == streamed->hello.shm_offer.has_value());
    return;
  }
  CheckSameHeader(recorded->frame.frame, streamed->frame.frame);
  CheckSameAbort(recorded->frame.frame, streamed->frame.frame);
  FUZZ_CHECK(recorded->shm.has_value() == streamed->shm.has_value());
  if (streamed->shm.has_value()) {
    FUZZ_CHECK(recorded->shm->slot == streamed->shm->slot);
    FUZZ_CHECK(recorded->shm->bytes == streamed->shm->bytes);
  }
  FUZZ_CHECK(Bytes(recorded->frame.payload) == Bytes(streamed->frame.payload));
}

}  // namespace
}  // namespace ringsync

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint8_t cuts = data[0];
  const uint8_t* message = data + 1;
  const size_t message_size = size - 1;
  absl::StatusOr<ringsync::DecodedMessage> decoded =
      ringsync::DecodeMessage(ringsync::Sliced(message, message_size, cuts));
  ringsync::CheckRecordAgrees(decoded, message, message_size);
  if (!decoded.ok()) return 0;
  ringsync::CheckAgreesWithProtobuf(*decoded, message, message_size);
  ringsync::CheckRoundTrip(*decoded);
  return 0;
}
