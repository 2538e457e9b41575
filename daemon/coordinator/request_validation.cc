#include "daemon/coordinator/request_validation.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "wire/host_port.h"

namespace ringsync {
namespace {

bool IsIdChar(char c) { return absl::ascii_isalnum(c) || c == '.' || c == '_' || c == '-'; }

}  // namespace

absl::Status ValidateWorkerId(absl::string_view worker_id) {
  bool ok = !worker_id.empty() && worker_id.size() <= kMaxWorkerIdBytes &&
            absl::ascii_isalnum(worker_id.front());
  for (char c : worker_id) ok = ok && IsIdChar(c);
  if (ok) return absl::OkStatus();
  const std::string shown =
      worker_id.empty() ? "empty" : absl::StrCat("'", SanitizeText(worker_id, 80), "'");
  return absl::InvalidArgumentError(absl::StrCat(
      "worker_id ", shown, " is invalid: use 1-", kMaxWorkerIdBytes,
      " characters from [A-Za-z0-9._-] starting with a letter or digit (e.g. --worker_id=w0)"));
}

absl::Status ValidateHostPort(absl::string_view field, absl::string_view address,
                              bool reachable) {
  absl::StatusOr<HostPort> parsed = ParseHostPort(address, PortUse::kConnect);
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(field, " ", parsed.status().message()));
  }
  if (reachable && parsed->is_wildcard()) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, " '", address, "' is a wildcard host, which other workers cannot reach; "
        "advertise an address they can connect to as HOST:PORT"));
  }
  return absl::OkStatus();
}

absl::Status ValidateIncarnation(absl::string_view worker_id, uint64_t incarnation) {
  if (incarnation != 0) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "worker '", SanitizeText(worker_id, kMaxWorkerIdBytes),
      "' sent no incarnation (0): every worker process picks a random non-zero one at start; "
      "run the same ringsyncd release on the coordinator and every worker"));
}

}  // namespace ringsync
