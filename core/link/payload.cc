#include "core/link/payload.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace ringsync {
namespace {

constexpr size_t kMaxElementBytes = 16;

}  // namespace

Payload::Payload(Piece bytes) {
  if (!bytes.empty()) pieces_.push_back(bytes);
  size_ = bytes.size();
}

Payload::Payload(absl::Span<const Piece> pieces) {
  for (const Piece& piece : pieces) {
    if (piece.empty()) continue;
    pieces_.push_back(piece);
    size_ += piece.size();
  }
}

absl::Status Payload::ForEachElementRun(
    size_t element_size,
    absl::FunctionRef<absl::Status(size_t offset, absl::Span<const std::byte> run)> fn) const {
  if (element_size == 0 || element_size > kMaxElementBytes || size_ % element_size != 0) {
    return absl::InvalidArgumentError(absl::StrCat("a payload of ", size_,
                                                   " bytes is not a whole number of ",
                                                   element_size, "-byte elements"));
  }
  std::byte straddling[kMaxElementBytes];
  size_t pending = 0;  // bytes of a split element gathered so far
  size_t offset = 0;   // payload bytes passed to fn so far
  for (Piece piece : pieces_) {
    if (pending > 0) {
      const size_t take = std::min(element_size - pending, piece.size());
      std::memcpy(straddling + pending, piece.data(), take);
      pending += take;
      piece.remove_prefix(take);
      if (pending < element_size) continue;
      if (absl::Status s = fn(offset, absl::MakeConstSpan(straddling, element_size)); !s.ok()) {
        return s;
      }
      offset += element_size;
      pending = 0;
    }
    const size_t whole = piece.size() / element_size * element_size;
    if (whole > 0) {
      if (absl::Status s = fn(offset, piece.first(whole)); !s.ok()) return s;
      offset += whole;
    }
    pending = piece.size() - whole;
    if (pending > 0) std::memcpy(straddling, piece.data() + whole, pending);
  }
  return absl::OkStatus();
}

void Payload::CopyTo(absl::Span<std::byte> dst) const {
  size_t at = 0;
  for (const Piece& piece : pieces_) {
    std::memcpy(dst.data() + at, piece.data(), piece.size());
    at += piece.size();
  }
}

std::vector<std::byte> Payload::ToVector() const {
  std::vector<std::byte> out(size_);
  CopyTo(absl::MakeSpan(out));
  return out;
}

}  // namespace ringsync
