// A fixed-size secret made from the kernel's random source and carried in a message as
// exactly its bytes: a data connection's one-time key (data_key.h), its seal key
// (record_seal.h).
#pragma once

#include <array>
#include <cstddef>
#include <cstring>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace ringsync {

template <size_t N>
using RandomKey = std::array<std::byte, N>;

// Fills `bytes` from the kernel's random source (getrandom).
absl::Status FillFromKernelRandom(absl::Span<std::byte> bytes);

template <size_t N>
absl::StatusOr<RandomKey<N>> NewRandomKey() {
  RandomKey<N> key;
  if (absl::Status filled = FillFromKernelRandom(absl::MakeSpan(key)); !filled.ok()) return filled;
  return key;
}

// The key as a message carries it.
template <size_t N>
std::string KeyBytes(const RandomKey<N>& key) {
  return std::string(reinterpret_cast<const char*>(key.data()), key.size());
}

// The key a message carried; InvalidArgument, naming `what` ("a data connection key"),
// unless exactly N bytes.
template <size_t N>
absl::StatusOr<RandomKey<N>> ParseKey(absl::string_view bytes, absl::string_view what) {
  if (bytes.size() != N) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " of ", bytes.size(), " bytes (", N, " expected)"));
  }
  RandomKey<N> key;
  std::memcpy(key.data(), bytes.data(), N);
  return key;
}

}  // namespace ringsync
