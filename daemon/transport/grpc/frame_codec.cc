#include "daemon/transport/grpc/frame_codec.h"

#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "daemon/logging/sanitized_text.h"
#include "wire/proto_convert.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "google/protobuf/wire_format_lite.h"
#include "grpcpp/support/proto_buffer_reader.h"
#include "ringsync/v1/peer.pb.h"

namespace ringsync {
namespace {

using google::protobuf::internal::WireFormatLite;

constexpr int kPayloadField = 15;
constexpr uint32_t kPayloadTag =
    (kPayloadField << 3) | WireFormatLite::WIRETYPE_LENGTH_DELIMITED;

// Owns what the release callback needs; freed by the slice's destroy hook.
struct PayloadRelease {
  std::function<void()> release;
  static void Run(void* self) {
    std::unique_ptr<PayloadRelease> owned(static_cast<PayloadRelease*>(self));
    if (owned->release) owned->release();
  }
};

void AppendVarint(std::string& out, uint64_t value) {
  while (value >= 0x80) {
    out.push_back(static_cast<char>((value & 0x7f) | 0x80));
    value >>= 7;
  }
  out.push_back(static_cast<char>(value));
}

v1::PeerFrame HeaderOf(const Frame& frame) {
  v1::PeerFrame header;
  switch (frame.kind) {
    case FrameKind::kSegment: header.set_kind(v1::FRAME_KIND_SEGMENT); break;
    case FrameKind::kAbort: header.set_kind(v1::FRAME_KIND_ABORT); break;
    case FrameKind::kAgree: header.set_kind(v1::FRAME_KIND_AGREE); break;
    case FrameKind::kCommit: header.set_kind(v1::FRAME_KIND_COMMIT); break;
    case FrameKind::kRelay: header.set_kind(v1::FRAME_KIND_RELAY); break;
    case FrameKind::kGather: header.set_kind(v1::FRAME_KIND_GATHER); break;
    case FrameKind::kDirect: header.set_kind(v1::FRAME_KIND_DIRECT); break;
  }
  header.set_sender_rank(frame.sender_rank);
  header.set_generation(frame.generation);
  header.set_sequence(frame.sequence);
  header.set_step(frame.step);
  header.set_segment(frame.segment);
  header.set_chunk(frame.chunk);
  header.set_offset(frame.offset);
  header.set_count(frame.count);
  if (frame.spec.has_value()) ToProto(*frame.spec, header.mutable_spec());
  if (frame.kind == FrameKind::kAgree) header.set_min_segment_bytes(frame.min_segment_bytes);
  if (frame.kind == FrameKind::kAbort) {
    header.set_abort_origin(frame.abort_origin);
    header.set_abort_reason(frame.abort_reason);
    header.set_abort_before_commit(frame.abort_before_commit);
  }
  return header;
}

// The received slices, which the payload's pieces point into.
struct ReceivedPayload {
  std::vector<grpc::Slice> slices;
};

// The payload bytes [start, start + length) of the message as pieces of the received
// slices, in order, read in place (a message arrives as the slices of its HTTP/2 frames).
Payload LocatePayload(const ReceivedPayload& held, size_t start, size_t length) {
  absl::InlinedVector<Payload::Piece, 8> pieces;
  size_t position = 0;
  for (const grpc::Slice& slice : held.slices) {
    const size_t end = position + slice.size();
    const size_t from = std::max(start, position);
    const size_t to = std::min(start + length, end);
    if (from < to) {
      pieces.emplace_back(reinterpret_cast<const std::byte*>(slice.begin()) + (from - position),
                          to - from);
    }
    position = end;
    if (position >= start + length) break;
  }
  return Payload(pieces);
}

absl::Status Malformed(absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("malformed peer frame: ", what));
}

// Where a message's payload field lies: [field_start, start) its tag and length,
// [start, start + length) its bytes.
struct PayloadField {
  bool present = false;
  size_t field_start = 0;
  size_t start = 0;
  uint32_t length = 0;
};

// Reads every field of a `size`-byte message from `input`, noting the payload's and
// copying every other field to `header_out` (when given).
absl::Status WalkFields(google::protobuf::io::CodedInputStream& input, size_t size,
                        PayloadField& payload,
                        google::protobuf::io::CodedOutputStream* header_out) {
  for (;;) {
    const size_t field_start = static_cast<size_t>(input.CurrentPosition());
    const uint32_t tag = input.ReadTag();
    if (tag == 0) break;
    if (tag == kPayloadTag) {
      if (payload.present) return Malformed("payload appears twice");
      if (!input.ReadVarint32(&payload.length)) return Malformed("truncated payload length");
      payload.field_start = field_start;
      payload.start = static_cast<size_t>(input.CurrentPosition());
      if (payload.start + payload.length > size || !input.Skip(static_cast<int>(payload.length))) {
        return Malformed("payload runs past the end of the message");
      }
      payload.present = true;
    } else if (header_out != nullptr ? !WireFormatLite::SkipField(&input, tag, header_out)
                                     : !WireFormatLite::SkipField(&input, tag)) {
      return Malformed("unparseable header field");
    }
  }
  if (!input.ConsumedEntireMessage()) return Malformed("trailing garbage");
  return absl::OkStatus();
}

// A message's meaning, from its header; `has_payload`: it carries payload bytes inline.
absl::StatusOr<DecodedMessage> FromHeader(const v1::PeerFrame& header, bool has_payload) {
  DecodedMessage out;
  if (header.kind() == v1::FRAME_KIND_HELLO) {
    out.is_hello = true;
    out.hello.sender_rank = header.sender_rank();
    out.hello.generation = header.generation();
    out.hello.worker_id = header.sender_worker_id();
    // Bounded like a rank: no ring has more ranks than an int counts.
    if (header.stride() > static_cast<uint32_t>(std::numeric_limits<int>::max())) {
      return Malformed("a hello's stride out of range");
    }
    out.hello.stride = header.stride() > 1 ? static_cast<int>(header.stride()) : 1;
    out.hello.data_connection = header.data_connection();
    if (header.has_shm_offer()) {
      // Checked when the receiver decides to map it (SlotRingReader::Attach); the boot id
      // is only compared, and bounded here like any string from a peer.
      constexpr size_t kMaxBootIdBytes = 64;
      const v1::ShmOffer& offer = header.shm_offer();
      out.hello.host = HostIdentity{offer.boot_id().substr(0, kMaxBootIdBytes),
                                    offer.ipc_namespace(), offer.pid_namespace(),
                                    offer.net_namespace(), offer.uid()};
      out.hello.shm_offer = SlotRingOffer{offer.pid(),        offer.fd(),
                                          offer.region_bytes(), offer.slot_count(),
                                          offer.slot_bytes(),   offer.mailbox_capacity(),
                                          offer.token()};
    }
    return out;
  }
  Frame& frame = out.frame.frame;
  switch (header.kind()) {
    case v1::FRAME_KIND_SEGMENT: frame.kind = FrameKind::kSegment; break;
    case v1::FRAME_KIND_ABORT: frame.kind = FrameKind::kAbort; break;
    case v1::FRAME_KIND_AGREE: frame.kind = FrameKind::kAgree; break;
    case v1::FRAME_KIND_COMMIT: frame.kind = FrameKind::kCommit; break;
    case v1::FRAME_KIND_RELAY: frame.kind = FrameKind::kRelay; break;
    case v1::FRAME_KIND_GATHER: frame.kind = FrameKind::kGather; break;
    case v1::FRAME_KIND_DIRECT: frame.kind = FrameKind::kDirect; break;
    default: return Malformed(absl::StrCat("unknown frame kind ", header.kind()));
  }
  frame.sender_rank = header.sender_rank();
  frame.generation = header.generation();
  frame.sequence = header.sequence();
  frame.step = header.step();
  frame.segment = header.segment();
  frame.chunk = header.chunk();
  frame.offset = header.offset();
  frame.count = header.count();
  frame.abort_origin = header.abort_origin();
  // A peer's words reach error messages and logs: one line, bounded.
  frame.abort_reason = SanitizeText(header.abort_reason(), kMaxAbortReasonBytes);
  frame.abort_before_commit = header.abort_before_commit();
  frame.min_segment_bytes = header.min_segment_bytes();
  if (header.has_spec()) {
    absl::StatusOr<CollectiveSpec> spec = FromProto(header.spec());
    if (!spec.ok()) return Malformed(spec.status().message());
    frame.spec = *std::move(spec);
  }
  if (header.shm_slot() != 0) {
    if (has_payload) return Malformed("a payload both inline and in a slot");
    if (frame.kind != FrameKind::kSegment && frame.kind != FrameKind::kRelay) {
      return Malformed("a slot on a frame without data");
    }
    out.shm = ShmPayloadRef{header.shm_slot() - uint64_t{1}, header.shm_bytes()};
  }
  return out;
}

}  // namespace

std::string FrameHead(const Frame& frame, size_t payload_bytes) {
  std::string head = HeaderOf(frame).SerializeAsString();
  AppendVarint(head, kPayloadTag);
  AppendVarint(head, payload_bytes);
  return head;
}

std::string ShmFrameBytes(const Frame& frame, const ShmPayloadRef& shm) {
  v1::PeerFrame header = HeaderOf(frame);
  header.set_shm_slot(static_cast<uint32_t>(shm.slot + 1));
  header.set_shm_bytes(shm.bytes);
  return header.SerializeAsString();
}

grpc::ByteBuffer EncodeFrame(const Frame& frame, absl::Span<const std::byte> payload,
                             std::function<void()> release) {
  std::vector<grpc::Slice> slices;
  slices.emplace_back(FrameHead(frame, payload.size()));
  if (payload.empty()) {
    if (release) release();
  } else {
    auto owner = std::make_unique<PayloadRelease>(PayloadRelease{std::move(release)});
    slices.emplace_back(const_cast<std::byte*>(payload.data()), payload.size(),
                        &PayloadRelease::Run, owner.release());
  }
  return grpc::ByteBuffer(slices.data(), slices.size());
}

grpc::ByteBuffer EncodeShmFrame(const Frame& frame, const ShmPayloadRef& shm) {
  grpc::Slice slice(ShmFrameBytes(frame, shm));
  return grpc::ByteBuffer(&slice, 1);
}

grpc::ByteBuffer EncodeHello(const PeerHello& hello) {
  v1::PeerFrame frame;
  frame.set_kind(v1::FRAME_KIND_HELLO);
  frame.set_sender_rank(hello.sender_rank);
  frame.set_generation(hello.generation);
  frame.set_sender_worker_id(hello.worker_id);
  if (hello.stride > 1) frame.set_stride(static_cast<uint32_t>(hello.stride));
  frame.set_data_connection(hello.data_connection);
  if (hello.host.has_value() && hello.shm_offer.has_value()) {
    v1::ShmOffer* offer = frame.mutable_shm_offer();
    offer->set_boot_id(hello.host->boot_id);
    offer->set_ipc_namespace(hello.host->ipc_namespace);
    offer->set_pid_namespace(hello.host->pid_namespace);
    offer->set_net_namespace(hello.host->net_namespace);
    offer->set_uid(hello.host->uid);
    offer->set_pid(hello.shm_offer->pid);
    offer->set_fd(hello.shm_offer->fd);
    offer->set_region_bytes(hello.shm_offer->region_bytes);
    offer->set_slot_count(hello.shm_offer->slot_count);
    offer->set_slot_bytes(hello.shm_offer->slot_bytes);
    offer->set_token(hello.shm_offer->token);
    offer->set_mailbox_capacity(hello.shm_offer->mailbox_capacity);
  }
  grpc::Slice slice(frame.SerializeAsString());
  return grpc::ByteBuffer(&slice, 1);
}

absl::StatusOr<DecodedMessage> DecodeMessage(const grpc::ByteBuffer& buffer) {
  auto held = std::make_shared<ReceivedPayload>();
  if (!buffer.Dump(&held->slices).ok()) return Malformed("unreadable byte buffer");

  // Walk the fields: copy every header field into `header_bytes`, note where the
  // payload lies, and skip over it without copying.
  grpc::ByteBuffer copy(buffer);  // shares slices; ProtoBufferReader needs a mutable buffer
  grpc::ProtoBufferReader reader(&copy);
  google::protobuf::io::CodedInputStream input(&reader);
  std::string header_bytes;
  PayloadField payload;
  {
    google::protobuf::io::StringOutputStream header_stream(&header_bytes);
    google::protobuf::io::CodedOutputStream header_out(&header_stream);
    if (absl::Status walked = WalkFields(input, buffer.Length(), payload, &header_out);
        !walked.ok()) {
      return walked;
    }
  }
  v1::PeerFrame header;
  if (!header.ParseFromString(header_bytes)) return Malformed("unparseable header");
  absl::StatusOr<DecodedMessage> out = FromHeader(header, payload.length > 0);
  if (out.ok() && payload.length > 0) {
    out->frame.payload = LocatePayload(*held, payload.start, payload.length);
    out->frame.storage = std::move(held);
  }
  return out;
}

absl::StatusOr<DecodedMessage> DecodeRecord(std::vector<std::byte> record) {
  auto held = std::make_shared<const std::vector<std::byte>>(std::move(record));
  const size_t size = held->size();
  return DecodeRecord(std::shared_ptr<const std::byte[]>(held, held->data()), size);
}

absl::StatusOr<DecodedMessage> DecodeRecord(std::shared_ptr<const std::byte[]> held, size_t size) {
  const auto* data = reinterpret_cast<const uint8_t*>(held.get());
  if (size > static_cast<size_t>(std::numeric_limits<int>::max())) {
    return Malformed("a record over 2 GiB");
  }
  google::protobuf::io::CodedInputStream input(data, static_cast<int>(size));
  PayloadField payload;
  if (absl::Status walked = WalkFields(input, size, payload, nullptr); !walked.ok()) {
    return walked;
  }
  // The header is the record less the payload's field: in one piece when the payload
  // comes last, as this codec writes it.
  v1::PeerFrame header;
  const size_t after = payload.start + payload.length;
  const bool parsed =
      !payload.present ? header.ParseFromArray(data, static_cast<int>(size))
      : after == size  ? header.ParseFromArray(data, static_cast<int>(payload.field_start))
                       : header.ParseFromString(absl::StrCat(
                             absl::string_view(reinterpret_cast<const char*>(data),
                                               payload.field_start),
                             absl::string_view(reinterpret_cast<const char*>(data) + after,
                                               size - after)));
  if (!parsed) return Malformed("unparseable header");
  absl::StatusOr<DecodedMessage> out = FromHeader(header, payload.length > 0);
  if (out.ok() && payload.length > 0) {
    out->frame.payload = Payload::Piece(held.get() + payload.start, payload.length);
    out->frame.storage = std::move(held);
  }
  return out;
}

}  // namespace ringsync
