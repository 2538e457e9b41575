// Payload: the bytes of a received frame as the link holds them — one span, or several
// pieces in order (a gRPC message arrives as the slices of its HTTP/2 frames, about
// 16 KiB each). Readers walk the pieces rather than ask for one contiguous copy, so a
// received segment is reduced or copied into place straight from the transport's memory.
//
// A Payload only points at memory; the ReceivedFrame that carries it keeps that memory
// alive (ReceivedFrame::storage).
#pragma once

#include <cstddef>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/types/span.h"

namespace ringsync {

class Payload {
 public:
  using Piece = absl::Span<const std::byte>;

  Payload() = default;
  // One contiguous piece (implicit: a span is a payload).
  Payload(Piece bytes);  // NOLINT(google-explicit-constructor)
  // Several pieces, in order; empty ones are dropped.
  explicit Payload(absl::Span<const Piece> pieces);

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  absl::Span<const Piece> pieces() const { return pieces_; }

  // Calls `fn(offset, run)` for consecutive runs of whole elements of `element_size`
  // bytes covering the payload in order; `offset` is the run's first byte within the
  // payload. Each piece is passed in place, cut at element boundaries; an element split
  // between two pieces is passed alone, gathered into a few bytes of scratch. Stops at
  // the first error `fn` returns. InvalidArgument if the size is not a whole number of
  // elements or element_size is 0 or above 16.
  absl::Status ForEachElementRun(
      size_t element_size,
      absl::FunctionRef<absl::Status(size_t offset, absl::Span<const std::byte> run)> fn) const;

  // Copies the payload to `dst`. REQUIRES: dst.size() == size().
  void CopyTo(absl::Span<std::byte> dst) const;
  // The payload as one vector (tests, diagnostics).
  std::vector<std::byte> ToVector() const;

 private:
  absl::InlinedVector<Piece, 1> pieces_;
  size_t size_ = 0;
};

}  // namespace ringsync
