// The flags every worker of a ring must set alike (wire/ring_setting.h), as the
// coordinator checks them at Join: bounded like every string from the network, and the
// same as every live worker's. A ring whose ranks cut buffers differently (another
// --segment_bytes) or pick different algorithms fails every collective it runs; refusing
// the odd worker at its Join names the cause before any collective, at the worker that
// differs.
// Thread-safety: pure functions.
#pragma once

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "wire/ring_setting.h"

namespace ringsync {

// InvalidArgument unless there are at most kMaxRingSettings settings, each flag "--"
// and then 1..62 of [a-z0-9_] (once each), each value 1..64 printable ASCII characters.
absl::Status ValidateRingSettings(absl::string_view worker_id,
                                  absl::Span<const RingSetting> settings);

// FailedPrecondition naming every flag that both state and `joining_id` sets otherwise
// than the live worker `member_id`, with both values and what to do. OK when they agree
// on every flag both state (a flag only one states is not compared).
absl::Status CheckSameRingSettings(absl::string_view joining_id,
                                   absl::Span<const RingSetting> joining,
                                   absl::string_view member_id,
                                   absl::Span<const RingSetting> member);

}  // namespace ringsync
