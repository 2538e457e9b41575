#include "client/src/collective_call.h"

#include <algorithm>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/reduce/reducer.h"
#include "wire/proto_convert.h"

namespace ringsync::internal {
namespace {

absl::Status Invalid(const CollectiveCall& call, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(DescribeCall(call), ": ", what));
}

absl::Status CheckNonZero(const CollectiveCall& call, absl::string_view field, double scale) {
  if (scale != 0) return absl::OkStatus();
  return Invalid(call, absl::StrCat(field, " is 0; scales must be non-zero (1 for none)"));
}

}  // namespace

std::string DescribeCall(const CollectiveCall& call) {
  const std::string shape = call.spec.kind == CollectiveKind::kBarrier
                                ? std::string(CollectiveKindName(call.spec.kind))
                                : DescribeShape(call.spec);
  return absl::StrCat("collective '", call.spec.name, "' (", shape, ")");
}

absl::StatusOr<CallBytes> ValidateCall(const CollectiveCall& call, int world_size) {
  const CollectiveSpec& spec = call.spec;
  if (spec.name.empty()) {
    return Invalid(call,
                   "the name is empty; label each collective, e.g. \"grad/fc1\", so that "
                   "errors and mismatches between ranks can name it");
  }
  if (!IsValid(spec.dtype)) {
    return Invalid(call, absl::StrCat("unknown dtype ", static_cast<int>(spec.dtype)));
  }
  if (spec.kind == CollectiveKind::kAllReduce) {
    // Zero is how the wire says "unset" (= 1), so a real zero would silently become 1.
    if (absl::Status s = CheckNonZero(call, "pre_scale", spec.pre_scale); !s.ok()) return s;
    if (absl::Status s = CheckNonZero(call, "post_scale", spec.post_scale); !s.ok()) return s;
    // The reducers' own rules: valid op, finite scales, no scales on integer types.
    const ReduceSpec reduce{spec.dtype, spec.op, std::max(world_size, 1), spec.pre_scale,
                            spec.post_scale};
    if (absl::Status s = ValidateReduceSpec(reduce); !s.ok()) return Invalid(call, s.message());
  }
  if (call.timeout < absl::ZeroDuration() || call.timeout == absl::InfiniteDuration()) {
    return Invalid(call, absl::StrCat("timeout ", absl::FormatDuration(call.timeout),
                                      " must be positive and finite (zero: the worker's default)"));
  }
  const bool needs_world =
      spec.kind == CollectiveKind::kBroadcast || spec.kind == CollectiveKind::kAllGather;
  if (needs_world && world_size <= 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        DescribeCall(call), ": the worker reports no formed ring, so the ring's size is unknown"));
  }
  if (spec.kind == CollectiveKind::kBroadcast && (spec.root < 0 || spec.root >= world_size)) {
    return Invalid(call,
                   absl::StrCat("root ", spec.root, " is not a rank of this ring of ", world_size));
  }

  CallBytes bytes;
  const size_t element = DTypeSize(spec.dtype);
  if (__builtin_mul_overflow(spec.count, element, &bytes.input)) {
    return Invalid(call, absl::StrCat(spec.count, " elements overflow size_t bytes"));
  }
  size_t expected_output = spec.count;
  if (spec.kind == CollectiveKind::kAllGather &&
      __builtin_mul_overflow(spec.count, static_cast<size_t>(world_size), &expected_output)) {
    return Invalid(call, absl::StrCat(world_size, " x ", spec.count, " elements overflow size_t"));
  }
  if (call.output_count != expected_output) {
    return Invalid(
        call, absl::StrCat(
                  "the output holds ", call.output_count, " elements; it needs ", expected_output,
                  spec.kind == CollectiveKind::kAllGather
                      ? absl::StrCat(" (world size ", world_size, " x ", spec.count, " per rank)")
                      : ""));
  }
  if (__builtin_mul_overflow(call.output_count, element, &bytes.output)) {
    return Invalid(call, absl::StrCat(call.output_count, " elements overflow size_t bytes"));
  }
  if (call.input == nullptr && bytes.input > 0) return Invalid(call, "the input is null");
  if (call.output == nullptr && bytes.output > 0) return Invalid(call, "the buffer is null");
  return bytes;
}

void EncodeRequest(const CollectiveCall& call, v1::CollectiveRequest* request) {
  const CollectiveSpec& spec = call.spec;
  request->set_name(spec.name);
  request->set_dtype(ToProto(spec.dtype));
  request->set_count(spec.count);
  if (spec.kind == CollectiveKind::kAllReduce) {
    request->set_op(ToProto(spec.op));
    request->set_pre_scale(spec.pre_scale);
    request->set_post_scale(spec.post_scale);
  }
  if (spec.kind == CollectiveKind::kBroadcast) request->set_root(spec.root);
  if (call.timeout > absl::ZeroDuration()) {
    // Round up: a sub-millisecond timeout must not turn into 0, "the worker's default".
    request->set_timeout_ms(
        absl::ToInt64Milliseconds(call.timeout + absl::Milliseconds(1) - absl::Nanoseconds(1)));
  }
}

}  // namespace ringsync::internal
