// How a failed collective on a registered buffer says what the buffer holds: a status
// payload that ringsync::RegisteredBufferUntouched reads. Absent means untouched (the
// call failed before the worker could write into the buffer).
#pragma once

#include "absl/strings/string_view.h"

namespace ringsync::internal {

inline constexpr absl::string_view kRegisteredBufferPayloadUrl =
    "type.ringsync.dev/ringsync.RegisteredBufferState";
inline constexpr absl::string_view kRegisteredBufferUnspecified = "unspecified";

}  // namespace ringsync::internal
