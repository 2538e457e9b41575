#include "client/src/collective_call.h"

#include <cstdint>
#include <optional>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "wire/collective_request.h"

namespace ringsync::internal {
namespace {

absl::Status Invalid(const CollectiveCall& call, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(DescribeCall(call), ": ", what));
}

}  // namespace

std::string DescribeCall(const CollectiveCall& call) {
  return absl::StrCat("collective ", QuotedName(call.spec), " (", DescribeShape(call.spec), ")");
}

absl::StatusOr<CallBytes> ValidateCall(const CollectiveCall& call, int world_size) {
  const CollectiveSpec& spec = call.spec;
  if (absl::Status s = ValidateSpec(spec); !s.ok()) return Invalid(call, s.message());
  if (call.timeout < absl::ZeroDuration() || call.timeout > kMaxRequestTimeout) {
    return Invalid(call, absl::StrCat("timeout ", absl::FormatDuration(call.timeout),
                                      " must be between zero (the worker's default) and ",
                                      absl::FormatDuration(kMaxRequestTimeout)));
  }
  const CollectiveKindTraits traits = TraitsOf(spec.kind);
  if ((traits.has_root || traits.gathers || traits.scatters || traits.exchanges) &&
      world_size <= 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        DescribeCall(call), ": the worker reports no formed ring, so the ring's size is unknown"));
  }
  if (traits.has_root && spec.root >= world_size) {
    return Invalid(call,
                   absl::StrCat("root ", spec.root, " is not a rank of this ring of ", world_size));
  }

  CallBytes bytes;
  const size_t element = DTypeSize(spec.dtype);
  if (__builtin_mul_overflow(spec.count, element, &bytes.input)) {
    return Invalid(call, absl::StrCat(spec.count, " elements overflow size_t bytes"));
  }
  const std::optional<uint64_t> expected_output = ResultElements(spec, world_size);
  if (HasUnevenBlocks(spec)) {
    if (!expected_output.has_value()) {
      return Invalid(call, absl::StrCat("split sizes for ", spec.send_counts.size(),
                                        " ranks, but this ring has ", world_size));
    }
    bytes.side_by_side = true;
  }
  if (!expected_output.has_value() && (traits.scatters || traits.exchanges)) {
    return Invalid(call, absl::StrCat("the input holds ", spec.count, " elements, which is not "
                                      "one block for each of this ring's ", world_size, " ranks"));
  }
  if (!expected_output.has_value()) {
    return Invalid(call, absl::StrCat(world_size, " x ", spec.count, " elements overflow"));
  }
  if (call.output_count != *expected_output) {
    return Invalid(
        call, absl::StrCat("the output holds ", call.output_count, " elements; it needs ",
                           *expected_output,
                           traits.gathers    ? absl::StrCat(" (world size ", world_size, " x ",
                                                            spec.count, " per rank)")
                           : traits.scatters ? absl::StrCat(" (", spec.count, " / world size ",
                                                            world_size, ")")
                                             : ""));
  }
  if (__builtin_mul_overflow(call.output_count, element, &bytes.output)) {
    return Invalid(call, absl::StrCat(call.output_count, " elements overflow size_t bytes"));
  }
  if (!call.pieces.empty()) return bytes;  // each piece was checked when the call was fused
  // A scatter's other ranks may pass no input; the root's is checked where the rank is
  // known (ClientCore::StartNow).
  if (call.input == nullptr && bytes.input > 0 && spec.kind != CollectiveKind::kScatter) {
    return Invalid(call, "the input is null");
  }
  // Likewise a gather's other ranks may pass no output.
  if (call.output == nullptr && bytes.output > 0 && spec.kind != CollectiveKind::kGather) {
    return Invalid(call, "the buffer is null");
  }
  return bytes;
}

void EncodeRequest(const CollectiveCall& call, v1::CollectiveRequest* request) {
  SetRequestSpec(call.spec, request);
  if (call.timeout > absl::ZeroDuration()) {
    // Round up: a sub-millisecond timeout must not turn into 0, "the worker's default".
    request->set_timeout_ms(
        absl::ToInt64Milliseconds(call.timeout + absl::Milliseconds(1) - absl::Nanoseconds(1)));
  }
}

}  // namespace ringsync::internal
