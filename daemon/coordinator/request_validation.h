// Checks for the fields a worker sends the coordinator. Every string that arrives over
// the network passes through one of these before it is stored, logged or published.
// The messages say what is wrong and what a valid value looks like.
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "daemon/logging/sanitized_text.h"  // SanitizeText, for the callers of these checks

namespace ringsync {

// Longest accepted worker id; it shows up in logs, views and socket names.
inline constexpr size_t kMaxWorkerIdBytes = 64;

// 1..64 characters from [A-Za-z0-9._-], starting with a letter or digit.
absl::Status ValidateWorkerId(absl::string_view worker_id);

// `field` names the request field in messages, e.g. "peer_address".
// Accepts HOST:PORT as ParseHostPort reads an address to connect to (wire/host_port.h). When `reachable` is set, wildcard hosts (0.0.0.0, [::]) are refused:
// other machines cannot connect to them.
absl::Status ValidateHostPort(absl::string_view field, absl::string_view address,
                              bool reachable);

// A worker's incarnation: random per process start and never 0, which is what an unset
// field reads as (a daemon of an older release).
absl::Status ValidateIncarnation(absl::string_view worker_id, uint64_t incarnation);

}  // namespace ringsync
