// Sealed records (AES-256-GCM under a key that only the stream's two ends know): a record
// opens to exactly what was sealed, in the order it was sealed; what travels hides it; and
// anything else — a changed byte anywhere (prefix, ciphertext, tag), a record replayed,
// skipped or reordered, another key — fails to open, after which the connection opens
// nothing more.
#include "daemon/transport/tcp/record_seal.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringsync {
namespace {

using ::testing::HasSubstr;

absl::Span<const std::byte> Bytes(const std::string& s) {
  return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}
std::string Text(absl::Span<const std::byte> bytes) {
  return std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

// A record as the wire carries it: the prefix, then the sealed bytes.
struct Wire {
  std::string prefix;
  std::vector<std::byte> sealed;
};

class RecordSealTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<RecordSealKey> made = NewRecordSealKey();
    ASSERT_TRUE(made.ok()) << made.status();
    key_ = *made;
    absl::StatusOr<std::unique_ptr<RecordSealer>> sealer = RecordSealer::Create(key_);
    absl::StatusOr<std::unique_ptr<RecordOpener>> opener = RecordOpener::Create(key_);
    ASSERT_TRUE(sealer.ok() && opener.ok());
    sealer_ = *std::move(sealer);
    opener_ = *std::move(opener);
  }

  Wire Seal(const std::vector<std::string>& pieces, const std::string& prefix = "LEN4") {
    std::vector<absl::Span<const std::byte>> spans;
    for (const std::string& piece : pieces) spans.push_back(Bytes(piece));
    Wire wire{prefix, {}};
    EXPECT_TRUE(sealer_->Seal(Bytes(wire.prefix), spans, wire.sealed).ok());
    return wire;
  }
  absl::StatusOr<std::string> Open(Wire wire) {
    absl::StatusOr<size_t> plain = opener_->Open(Bytes(wire.prefix), absl::MakeSpan(wire.sealed));
    if (!plain.ok()) return plain.status();
    return Text(absl::MakeConstSpan(wire.sealed).first(*plain));
  }

  RecordSealKey key_{};
  std::unique_ptr<RecordSealer> sealer_;
  std::unique_ptr<RecordOpener> opener_;
};

TEST_F(RecordSealTest, ARecordOpensToWhatWasSealedInTheOrderItWasSealed) {
  for (int i = 0; i < 5; ++i) {
    const std::string body = "record " + std::to_string(i);
    Wire wire = Seal({"frame head|", "", body});
    EXPECT_EQ(wire.sealed.size(), 11 + body.size() + kRecordSealTagBytes);
    absl::StatusOr<std::string> opened = Open(std::move(wire));
    ASSERT_TRUE(opened.ok()) << opened.status();
    EXPECT_EQ(*opened, "frame head|" + body);
  }
}

TEST_F(RecordSealTest, WhatTravelsDoesNotShowThePlaintext) {
  const std::string secret(4096, 'g');  // a gradient, say
  const Wire wire = Seal({secret});
  EXPECT_EQ(Text(wire.sealed).find("gggggggg"), std::string::npos);
  // The same plaintext sealed again (the next record number) travels differently.
  const Wire again = Seal({secret});
  EXPECT_NE(Text(wire.sealed), Text(again.sealed));
}

TEST_F(RecordSealTest, AChangedByteAnywhereFailsAndTheConnectionOpensNothingMore) {
  const std::string body = "a segment's payload";
  for (size_t flip : {size_t{0}, body.size() - 1, body.size(), body.size() + kRecordSealTagBytes - 1}) {
    SetUp();  // a fresh connection
    Wire wire = Seal({body});
    wire.sealed[flip] ^= std::byte{0x01};
    absl::StatusOr<std::string> opened = Open(std::move(wire));
    ASSERT_FALSE(opened.ok()) << "byte " << flip << " changed, yet it opened";
    EXPECT_EQ(opened.status().code(), absl::StatusCode::kDataLoss);
    EXPECT_THAT(opened.status().message(), HasSubstr("sealed record 0"));
    EXPECT_THAT(opened.status().message(), HasSubstr("failed authentication"));
    EXPECT_FALSE(Open(Seal({"the next one, untouched"})).ok()) << "a failed connection stays failed";
  }
  SetUp();
  Wire wire = Seal({body});
  wire.prefix[1] ^= 0x01;  // the length prefix is authenticated too
  EXPECT_FALSE(Open(std::move(wire)).ok());
}

TEST_F(RecordSealTest, ARecordReplayedSkippedOrReorderedFailsToOpen) {
  const Wire first = Seal({"first"});
  const Wire second = Seal({"second"});
  ASSERT_TRUE(Open(first).ok());
  EXPECT_FALSE(Open(first).ok()) << "replayed";

  SetUp();
  Seal({"skipped: never delivered"});
  EXPECT_FALSE(Open(Seal({"after the skipped one"})).ok()) << "skipped";

  SetUp();
  const Wire a = Seal({"a"});
  const Wire b = Seal({"b"});
  absl::StatusOr<std::string> opened = Open(b);
  ASSERT_FALSE(opened.ok()) << "reordered";
  EXPECT_THAT(opened.status().message(), HasSubstr("sealed record 0"));
}

TEST_F(RecordSealTest, ARecordSealedUnderAnotherKeyFailsToOpen) {
  absl::StatusOr<RecordSealKey> other = NewRecordSealKey();
  ASSERT_TRUE(other.ok());
  ASSERT_NE(*other, key_) << "two fresh keys should differ";
  absl::StatusOr<std::unique_ptr<RecordSealer>> stranger = RecordSealer::Create(*other);
  ASSERT_TRUE(stranger.ok());
  const std::string body = "a rogue peer's gradient";
  const absl::Span<const std::byte> pieces[] = {Bytes(body)};
  Wire wire{"LEN4", {}};
  ASSERT_TRUE((*stranger)->Seal(Bytes(wire.prefix), pieces, wire.sealed).ok());
  EXPECT_FALSE(Open(std::move(wire)).ok());
}

TEST_F(RecordSealTest, ARecordShorterThanItsTagFails) {
  Wire wire{"LEN4", std::vector<std::byte>(kRecordSealTagBytes - 1)};
  absl::StatusOr<std::string> opened = Open(std::move(wire));
  ASSERT_FALSE(opened.ok());
  EXPECT_THAT(opened.status().message(), HasSubstr("shorter than its tag"));
}

// Both ends replace the key after every `rekey_bytes` on the wire, in step: records of
// any sizes keep opening across the changes; an end that kept the first key opens nothing
// sealed after the first change.
TEST(RecordSealRekey, BothEndsReplaceTheKeyInStepAfterEveryRekeyBytes) {
  absl::StatusOr<RecordSealKey> key = NewRecordSealKey();
  ASSERT_TRUE(key.ok());
  constexpr uint64_t kRekeyBytes = 100;
  std::unique_ptr<RecordSealer> sealer = *RecordSealer::Create(*key, kRekeyBytes);
  std::unique_ptr<RecordOpener> opener = *RecordOpener::Create(*key, kRekeyBytes);
  std::unique_ptr<RecordOpener> stale = *RecordOpener::Create(*key);  // never rekeys
  uint64_t on_the_wire = 0;
  for (int i = 0; i < 40; ++i) {
    const std::string body(1 + (i * 37) % 90, static_cast<char>('a' + i % 26));
    const absl::Span<const std::byte> pieces[] = {Bytes(body)};
    std::vector<std::byte> sealed;
    ASSERT_TRUE(sealer->Seal(Bytes("LEN4"), pieces, sealed).ok());
    std::vector<std::byte> copy = sealed;
    absl::StatusOr<size_t> plain = opener->Open(Bytes("LEN4"), absl::MakeSpan(sealed));
    ASSERT_TRUE(plain.ok()) << "record " << i << ": " << plain.status();
    EXPECT_EQ(Text(absl::MakeConstSpan(sealed).first(*plain)), body);
    const bool before_first_change = on_the_wire < kRekeyBytes;
    EXPECT_EQ(stale->Open(Bytes("LEN4"), absl::MakeSpan(copy)).ok(), before_first_change)
        << "record " << i;
    on_the_wire += copy.size();
  }
  EXPECT_GT(on_the_wire, 10 * kRekeyBytes) << "the key changed many times";
}

TEST(RecordSealKey, TravelsAsExactly32Bytes) {
  absl::StatusOr<RecordSealKey> key = NewRecordSealKey();
  ASSERT_TRUE(key.ok());
  const std::string bytes = RecordSealKeyBytes(*key);
  EXPECT_EQ(bytes.size(), kRecordSealKeyBytes);
  absl::StatusOr<RecordSealKey> back = ParseRecordSealKey(bytes);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, *key);
  EXPECT_EQ(ParseRecordSealKey(bytes.substr(1)).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseRecordSealKey("").status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ringsync
