// Specification of the peer frame encoding: zero-copy on send, validated on receive,
// and wire-compatible with a plain protobuf PeerFrame.
#include "daemon/transport/grpc/frame_codec.h"

#include <algorithm>
#include <vector>
#include <string>

#include "absl/strings/escaping.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ringsync/v1/peer.pb.h"

namespace ringsync {
namespace {

using ::testing::HasSubstr;

std::vector<std::byte> Pattern(size_t n) {
  std::vector<std::byte> bytes(n);
  for (size_t i = 0; i < n; ++i) bytes[i] = static_cast<std::byte>(i * 7 + 3);
  return bytes;
}

Frame SampleFrame() {
  Frame frame;
  frame.sender_rank = 2;
  frame.generation = 9;
  frame.sequence = 17;
  frame.step = 3;
  frame.segment = 4;
  frame.chunk = 1;
  frame.offset = 1000;
  frame.count = 256;
  CollectiveSpec spec;
  spec.name = "grad/fc1";
  spec.sequence = 17;
  spec.dtype = DType::kBFloat16;
  spec.count = 4096;
  spec.op = ReduceOp::kAvg;
  frame.spec = spec;
  return frame;
}

TEST(FrameCodec, RoundTripsHeaderSpecAndPayload) {
  const std::vector<std::byte> payload = Pattern(512);
  bool released = false;
  absl::StatusOr<DecodedMessage> decoded;
  {
    grpc::ByteBuffer buffer = EncodeFrame(SampleFrame(), payload, [&] { released = true; });
    decoded = DecodeMessage(buffer);
  }
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_FALSE(decoded->is_hello);
  const Frame& f = decoded->frame.frame;
  EXPECT_EQ(f.sender_rank, 2);
  EXPECT_EQ(f.generation, 9u);
  EXPECT_EQ(f.step, 3u);
  EXPECT_EQ(f.offset, 1000u);
  ASSERT_TRUE(f.spec.has_value());
  EXPECT_EQ(*f.spec, *SampleFrame().spec);
  EXPECT_EQ(decoded->frame.payload.ToVector(), payload);
  decoded = absl::UnknownError("drop");  // releases the received slices
  EXPECT_TRUE(released) << "the release hook runs once no buffer references the payload";
}

TEST(FrameCodec, ThePayloadIsNotCopiedWhenEncoding) {
  const std::vector<std::byte> payload = Pattern(4096);
  grpc::ByteBuffer buffer = EncodeFrame(SampleFrame(), payload, nullptr);
  std::vector<grpc::Slice> slices;
  ASSERT_TRUE(buffer.Dump(&slices).ok());
  ASSERT_EQ(slices.size(), 2u);
  EXPECT_EQ(static_cast<const void*>(slices[1].begin()), static_cast<const void*>(payload.data()));
}

TEST(FrameCodec, IsWireCompatibleWithAPlainProtobufMessage) {
  const std::vector<std::byte> payload = Pattern(100);
  grpc::ByteBuffer buffer = EncodeFrame(SampleFrame(), payload, nullptr);
  grpc::Slice flat;
  ASSERT_TRUE(buffer.DumpToSingleSlice(&flat).ok());
  v1::PeerFrame parsed;
  ASSERT_TRUE(parsed.ParseFromArray(flat.begin(), static_cast<int>(flat.size())));
  EXPECT_EQ(parsed.sequence(), 17u);
  EXPECT_EQ(parsed.spec().name(), "grad/fc1");
  EXPECT_EQ(parsed.payload().size(), 100u);

  // And a plain protobuf message with the payload in the middle decodes too.
  parsed.set_step(5);
  const std::string bytes = parsed.SerializeAsString();
  grpc::Slice slice(bytes);
  absl::StatusOr<DecodedMessage> decoded = DecodeMessage(grpc::ByteBuffer(&slice, 1));
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(decoded->frame.frame.step, 5u);
  EXPECT_EQ(decoded->frame.payload.size(), 100u);
}

TEST(FrameCodec, HandsOnAPayloadSplitAcrossSlicesAsPiecesOfThemWithoutACopy) {
  const std::vector<std::byte> payload = Pattern(1000);
  grpc::ByteBuffer encoded = EncodeFrame(SampleFrame(), payload, nullptr);
  grpc::Slice flat;
  ASSERT_TRUE(encoded.DumpToSingleSlice(&flat).ok());
  std::vector<grpc::Slice> pieces;
  for (size_t at = 0; at < flat.size(); at += 97) {
    // Separate memory per slice, as received messages have (gRPC would merge adjacent
    // sub-slices of one slice back into one).
    pieces.emplace_back(flat.begin() + at, std::min<size_t>(97, flat.size() - at));
  }
  absl::StatusOr<DecodedMessage> decoded =
      DecodeMessage(grpc::ByteBuffer(pieces.data(), pieces.size()));
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(decoded->frame.payload.ToVector(), payload);
  // Every piece points into a received slice: nothing was gathered into new memory.
  const Payload& got = decoded->frame.payload;
  EXPECT_GE(got.pieces().size(), 1000u / 97);
  for (const Payload::Piece& piece : got.pieces()) {
    const auto* begin = reinterpret_cast<const uint8_t*>(piece.data());
    EXPECT_TRUE(std::any_of(pieces.begin(), pieces.end(), [&](const grpc::Slice& slice) {
      return begin >= slice.begin() && begin + piece.size() <= slice.end();
    })) << "a piece outside the received slices";
  }
}

TEST(FrameCodec, RejectsGarbageAndUnknownKinds) {
  const std::string garbage = "\xff\xff\xff\xff\xff\xff";
  grpc::Slice slice(garbage);
  absl::StatusOr<DecodedMessage> bad = DecodeMessage(grpc::ByteBuffer(&slice, 1));
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("malformed peer frame"));

  v1::PeerFrame unknown;
  unknown.set_kind(static_cast<v1::FrameKind>(42));
  grpc::Slice s2(unknown.SerializeAsString());
  EXPECT_EQ(DecodeMessage(grpc::ByteBuffer(&s2, 1)).status().code(),
            absl::StatusCode::kInvalidArgument);

  v1::PeerFrame bad_spec;
  bad_spec.set_kind(v1::FRAME_KIND_SEGMENT);
  bad_spec.mutable_spec()->set_kind(v1::COLLECTIVE_KIND_ALL_REDUCE);
  bad_spec.mutable_spec()->set_dtype(static_cast<v1::DType>(99));
  grpc::Slice s3(bad_spec.SerializeAsString());
  EXPECT_THAT(std::string(DecodeMessage(grpc::ByteBuffer(&s3, 1)).status().message()),
              HasSubstr("dtype"));
}

TEST(FrameCodec, HelloRoundTrips) {
  absl::StatusOr<DecodedMessage> decoded = DecodeMessage(EncodeHello({3, 12, "w3"}));
  ASSERT_TRUE(decoded.ok());
  EXPECT_TRUE(decoded->is_hello);
  EXPECT_EQ(decoded->hello.sender_rank, 3);
  EXPECT_EQ(decoded->hello.generation, 12u);
  EXPECT_EQ(decoded->hello.worker_id, "w3");
}

TEST(FrameCodec, AnAbortReasonArrivesAsOneBoundedLine) {
  Frame abort;
  abort.kind = FrameKind::kAbort;
  abort.abort_origin = 1;
  abort.abort_reason = "line one\nFAKE LOG LINE: rank 3 is evil" + std::string(5000, 'x');
  absl::StatusOr<DecodedMessage> decoded = DecodeMessage(EncodeFrame(abort, {}, nullptr));
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  const std::string& reason = decoded->frame.frame.abort_reason;
  EXPECT_THAT(reason, ::testing::StartsWith("line one FAKE LOG LINE"));
  EXPECT_EQ(reason.find('\n'), std::string::npos);
  EXPECT_EQ(reason.size(), kMaxAbortReasonBytes + 3);  // cut, and "..." says so
}

TEST(FrameCodec, CommitFramesAndAnAbortsBeforeCommitFlagSurviveTheWire) {
  Frame commit;
  commit.kind = FrameKind::kCommit;
  commit.sender_rank = 2;
  commit.sequence = 17;
  commit.step = 1;
  commit.chunk = 0;  // "rank 0 completed its data"
  absl::StatusOr<DecodedMessage> decoded = DecodeMessage(EncodeFrame(commit, {}, nullptr));
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(decoded->frame.frame.kind, FrameKind::kCommit);
  EXPECT_EQ(decoded->frame.frame.step, 1u);
  EXPECT_EQ(decoded->frame.frame.chunk, 0u);

  for (bool before_commit : {false, true}) {
    Frame abort;
    abort.kind = FrameKind::kAbort;
    abort.abort_origin = 1;
    abort.abort_before_commit = before_commit;
    decoded = DecodeMessage(EncodeFrame(abort, {}, nullptr));
    ASSERT_TRUE(decoded.ok()) << decoded.status();
    EXPECT_EQ(decoded->frame.frame.abort_before_commit, before_commit);
  }
}

TEST(FrameCodec, AnAgreementFrameCarriesItsLinksSmallestUsefulSegment) {
  Frame agree = SampleFrame();
  agree.kind = FrameKind::kAgree;
  agree.min_segment_bytes = size_t{1} << 20;
  absl::StatusOr<DecodedMessage> decoded = DecodeMessage(EncodeFrame(agree, {}, nullptr));
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(decoded->frame.frame.min_segment_bytes, size_t{1} << 20);

  Frame segment = SampleFrame();
  segment.min_segment_bytes = size_t{1} << 20;
  decoded = DecodeMessage(EncodeFrame(segment, {}, nullptr));
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(decoded->frame.frame.min_segment_bytes, 0u) << "only agreement frames carry it";
}

grpc::ByteBuffer Serialized(const v1::PeerFrame& frame) {
  grpc::Slice slice(frame.SerializeAsString());
  return grpc::ByteBuffer(&slice, 1);
}

TEST(FrameCodec, ASlotFrameCarriesOnlyItsHeaderAndNamesTheSlot) {
  absl::StatusOr<DecodedMessage> decoded =
      DecodeMessage(EncodeShmFrame(SampleFrame(), ShmPayloadRef{3, 512}));
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  ASSERT_TRUE(decoded->shm.has_value());
  EXPECT_EQ(decoded->shm->slot, 3u);
  EXPECT_EQ(decoded->shm->bytes, 512u);
  EXPECT_TRUE(decoded->frame.payload.empty());
  EXPECT_FALSE(DecodeMessage(EncodeFrame(SampleFrame(), Pattern(8), nullptr))->shm.has_value());
}

TEST(FrameCodec, ASlotIsRefusedBesideAnInlinePayloadOrOnAFrameWithoutData) {
  v1::PeerFrame both;
  both.set_kind(v1::FRAME_KIND_SEGMENT);
  both.set_shm_slot(1);
  both.set_payload("abcd");
  EXPECT_THAT(DecodeMessage(Serialized(both)).status().message(), HasSubstr("both inline and in a slot"));
  v1::PeerFrame abort;
  abort.set_kind(v1::FRAME_KIND_ABORT);
  abort.set_shm_slot(1);
  EXPECT_THAT(DecodeMessage(Serialized(abort)).status().message(), HasSubstr("without data"));
}

TEST(FrameCodec, AHelloCarriesTheSendersHostAndSlotRingOffer) {
  PeerHello hello{1, 5, "w1", HostIdentity{"boot", 11, 12, 13, 1000},
                  SlotRingOffer{4242, 7, 1 << 20, 8, 65536, 1 << 21, std::string(32, 'a')}};
  absl::StatusOr<DecodedMessage> decoded = DecodeMessage(EncodeHello(hello));
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  ASSERT_TRUE(decoded->hello.host.has_value() && decoded->hello.shm_offer.has_value());
  EXPECT_EQ(decoded->hello.host->boot_id, "boot");
  EXPECT_EQ(decoded->hello.host->pid_namespace, 12u);
  EXPECT_EQ(decoded->hello.shm_offer->pid, 4242);
  EXPECT_EQ(decoded->hello.shm_offer->slot_bytes, 65536u);
  EXPECT_EQ(decoded->hello.shm_offer->mailbox_capacity, uint64_t{1} << 21);
  EXPECT_EQ(decoded->hello.shm_offer->token, std::string(32, 'a'));
  hello.host.reset();
  hello.shm_offer.reset();
  EXPECT_FALSE(DecodeMessage(EncodeHello(hello))->hello.shm_offer.has_value());
}

}  // namespace
}  // namespace ringsync

namespace ringsync {
namespace {

std::vector<std::byte> BytesOf(absl::string_view s) {
  const auto* begin = reinterpret_cast<const std::byte*>(s.data());
  return std::vector<std::byte>(begin, begin + s.size());
}

TEST(FrameRecord, IsTheEncodedMessageInOnePieceAndDecodesWithItsPayloadReadInPlace) {
  const std::vector<std::byte> payload = Pattern(300);
  grpc::Slice flat;
  ASSERT_TRUE(EncodeFrame(SampleFrame(), payload, nullptr).DumpToSingleSlice(&flat).ok());
  std::vector<std::byte> record = BytesOf(FrameHead(SampleFrame(), payload.size()));
  const size_t head_bytes = record.size();
  record.insert(record.end(), payload.begin(), payload.end());
  ASSERT_EQ(record, BytesOf(absl::string_view(reinterpret_cast<const char*>(flat.begin()),
                                              flat.size())));

  absl::StatusOr<DecodedMessage> decoded = DecodeRecord(std::move(record));
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  const Frame& f = decoded->frame.frame;
  EXPECT_EQ(f.sequence, 17u);
  EXPECT_EQ(f.count, 256u);
  ASSERT_TRUE(f.spec.has_value());
  EXPECT_EQ(*f.spec, *SampleFrame().spec);
  EXPECT_EQ(decoded->frame.payload.ToVector(), payload);
  // One piece, inside the record the storage keeps.
  const auto* kept = static_cast<const std::byte*>(decoded->frame.storage.get());
  ASSERT_EQ(decoded->frame.payload.pieces().size(), 1u);
  EXPECT_EQ(decoded->frame.payload.pieces()[0].data(), kept + head_bytes);
}

// The message's bytes as a gRPC message of slices of `piece` bytes each, in separate
// memory (as received messages have them).
grpc::ByteBuffer InSlicesOf(const std::string& message, size_t piece) {
  std::vector<grpc::Slice> slices;
  for (size_t at = 0; at < message.size(); at += piece) {
    slices.emplace_back(message.data() + at, std::min(piece, message.size() - at));
  }
  return grpc::ByteBuffer(slices.data(), slices.size());
}

// Whatever a peer writes, a message in one piece (a mailbox record, a gRPC message of one
// slice) decodes as the same bytes in many slices do.
TEST(FrameRecord, DecodesEveryMessageAsTheStreamDecoderDoes) {
  v1::PeerFrame middle;  // a plain protobuf message: the payload before later fields
  middle.set_kind(v1::FRAME_KIND_RELAY);
  middle.set_payload("abcdefgh");
  middle.set_abort_before_commit(true);  // field 20: serialized after the payload (15)
  middle.set_step(5);
  v1::PeerFrame both;
  both.set_kind(v1::FRAME_KIND_SEGMENT);
  both.set_shm_slot(1);
  both.set_payload("abcd");
  v1::PeerFrame unknown;
  unknown.set_kind(static_cast<v1::FrameKind>(42));
  v1::PeerFrame bad_spec;
  bad_spec.set_kind(v1::FRAME_KIND_SEGMENT);
  bad_spec.mutable_spec()->set_kind(v1::COLLECTIVE_KIND_ALL_REDUCE);
  bad_spec.mutable_spec()->set_dtype(static_cast<v1::DType>(99));
  Frame abort = SampleFrame();
  abort.kind = FrameKind::kAbort;
  abort.abort_reason = "line one\nline two";
  std::string twice = FrameHead(SampleFrame(), 2) + "xy";
  twice += twice.substr(twice.size() - 4);  // the payload's tag, length and bytes again
  const std::string messages[] = {
      middle.SerializeAsString(),
      both.SerializeAsString(),
      unknown.SerializeAsString(),
      bad_spec.SerializeAsString(),
      FrameHead(abort, 0),
      ShmFrameBytes(SampleFrame(), ShmPayloadRef{3, 512}),
      twice,
      FrameHead(SampleFrame(), 100) + "short",
      std::string("\xff\xff\xff\xff\xff\xff"),
      std::string(),
  };
  for (const std::string& message : messages) {
    SCOPED_TRACE(absl::CHexEscape(message));
    const absl::StatusOr<DecodedMessage> streamed = DecodeMessage(InSlicesOf(message, 3));
    const absl::StatusOr<DecodedMessage> recorded = DecodeRecord(BytesOf(message));
    grpc::Slice slice(message);
    const absl::StatusOr<DecodedMessage> one_slice = DecodeMessage(grpc::ByteBuffer(&slice, 1));
    ASSERT_EQ(recorded.status(), streamed.status());
    ASSERT_EQ(one_slice.status(), streamed.status());
    if (!streamed.ok()) continue;
    EXPECT_EQ(one_slice->frame.frame.spec, streamed->frame.frame.spec);
    EXPECT_EQ(one_slice->frame.payload.ToVector(), streamed->frame.payload.ToVector());
    const Frame& a = streamed->frame.frame;
    const Frame& b = recorded->frame.frame;
    EXPECT_EQ(b.kind, a.kind);
    EXPECT_EQ(b.step, a.step);
    EXPECT_EQ(b.sequence, a.sequence);
    EXPECT_EQ(b.spec, a.spec);
    EXPECT_EQ(b.abort_reason, a.abort_reason);
    EXPECT_EQ(b.abort_before_commit, a.abort_before_commit);
    EXPECT_EQ(recorded->frame.payload.ToVector(), streamed->frame.payload.ToVector());
    EXPECT_EQ(recorded->shm.has_value(), streamed->shm.has_value());
    if (streamed->shm.has_value()) {
      EXPECT_EQ(recorded->shm->slot, streamed->shm->slot);
    }
  }
}

}  // namespace
}  // namespace ringsync
