#include "core/link/payload.h"

#include <cstdint>
#include <cstring>
#include <numeric>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringsync {
namespace {

std::vector<std::byte> Bytes(size_t n) {
  std::vector<std::byte> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<std::byte>(i * 7 + 3);
  return out;
}

// `bytes` cut into pieces at `cuts` (byte offsets, increasing).
std::vector<Payload::Piece> Cut(const std::vector<std::byte>& bytes, std::vector<size_t> cuts) {
  std::vector<Payload::Piece> pieces;
  size_t from = 0;
  cuts.push_back(bytes.size());
  for (size_t to : cuts) {
    pieces.emplace_back(bytes.data() + from, to - from);
    from = to;
  }
  return pieces;
}

TEST(Payload, OneSpanIsOnePiece) {
  const std::vector<std::byte> bytes = Bytes(40);
  const Payload payload(absl::MakeConstSpan(bytes));
  EXPECT_EQ(payload.size(), 40u);
  ASSERT_EQ(payload.pieces().size(), 1u);
  EXPECT_EQ(payload.pieces()[0].data(), bytes.data());
  EXPECT_EQ(payload.ToVector(), bytes);
  EXPECT_TRUE(Payload().empty());
}

TEST(Payload, PiecesCopyOutInOrderAndEmptyOnesAreDropped) {
  const std::vector<std::byte> bytes = Bytes(100);
  const Payload payload(Cut(bytes, {0, 13, 13, 64, 99}));
  EXPECT_EQ(payload.size(), 100u);
  EXPECT_EQ(payload.pieces().size(), 4u);
  std::vector<std::byte> out(100);
  payload.CopyTo(absl::MakeSpan(out));
  EXPECT_EQ(out, bytes);
}

// Every element reaches fn exactly once, at its offset, whole — wherever the pieces are
// cut, including inside an element and several times inside one element.
TEST(Payload, ElementRunsCoverEveryElementOnceWhereverThePiecesAreCut) {
  for (size_t element : {1u, 2u, 4u, 8u}) {
    const std::vector<std::byte> bytes = Bytes(element * 50);
    for (const std::vector<size_t>& cuts :
         std::vector<std::vector<size_t>>{{}, {element}, {1}, {3, 5, 6, 7}, {17, 100, 101, 250}}) {
      std::vector<size_t> inside;
      for (size_t c : cuts) {
        if (c <= bytes.size()) inside.push_back(c);
      }
      const Payload payload(Cut(bytes, inside));
      std::vector<std::byte> seen(bytes.size());
      size_t expected_offset = 0;
      absl::Status s = payload.ForEachElementRun(
          element, [&](size_t offset, absl::Span<const std::byte> run) -> absl::Status {
            EXPECT_EQ(offset, expected_offset);
            EXPECT_EQ(run.size() % element, 0u);
            EXPECT_FALSE(run.empty());
            std::memcpy(seen.data() + offset, run.data(), run.size());
            expected_offset += run.size();
            return absl::OkStatus();
          });
      ASSERT_TRUE(s.ok()) << s;
      EXPECT_EQ(expected_offset, bytes.size());
      EXPECT_EQ(seen, bytes) << "element " << element;
    }
  }
}

TEST(Payload, ElementRunsStopAtTheFirstErrorAndRefuseAPartialElement) {
  const std::vector<std::byte> bytes = Bytes(64);
  const Payload payload(Cut(bytes, {5, 30}));
  int calls = 0;
  absl::Status s = payload.ForEachElementRun(4, [&](size_t, absl::Span<const std::byte>) {
    ++calls;
    return absl::DataLossError("stop");
  });
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(payload.ForEachElementRun(3, [](size_t, auto) { return absl::OkStatus(); }).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(payload.ForEachElementRun(0, [](size_t, auto) { return absl::OkStatus(); }).code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ringsync
