#include "daemon/coordinator/ring_settings.h"

#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "daemon/coordinator/request_validation.h"

namespace ringsync {
namespace {

bool IsFlagName(absl::string_view flag) {
  if (!absl::ConsumePrefix(&flag, "--") || flag.empty() ||
      flag.size() + 2 > kMaxRingSettingFlagBytes) {
    return false;
  }
  for (char c : flag) {
    if (!absl::ascii_islower(c) && !absl::ascii_isdigit(c) && c != '_') return false;
  }
  return true;
}

bool IsValue(absl::string_view value) {
  if (value.empty() || value.size() > kMaxRingSettingValueBytes) return false;
  for (char c : value) {
    if (!absl::ascii_isgraph(c)) return false;
  }
  return true;
}

}  // namespace

absl::Status ValidateRingSettings(absl::string_view worker_id,
                                  absl::Span<const RingSetting> settings) {
  const std::string who = absl::StrCat("worker '", SanitizeText(worker_id, kMaxWorkerIdBytes), "'");
  if (settings.size() > kMaxRingSettings) {
    return absl::InvalidArgumentError(absl::StrCat(who, " states ", settings.size(),
                                                   " ring settings; at most ", kMaxRingSettings));
  }
  absl::flat_hash_set<absl::string_view> seen;
  for (const RingSetting& s : settings) {
    if (!IsFlagName(s.flag)) {
      return absl::InvalidArgumentError(absl::StrCat(
          who, " states a ring setting named '", SanitizeText(s.flag, kMaxRingSettingFlagBytes),
          "': a flag is '--' and then 1..", kMaxRingSettingFlagBytes - 2, " of [a-z0-9_]"));
    }
    if (!seen.insert(s.flag).second) {
      return absl::InvalidArgumentError(absl::StrCat(who, " states ", s.flag, " twice"));
    }
    if (!IsValue(s.value)) {
      return absl::InvalidArgumentError(absl::StrCat(
          who, " states ", s.flag, "='", SanitizeText(s.value, kMaxRingSettingValueBytes),
          "': a value is 1..", kMaxRingSettingValueBytes, " printable ASCII characters"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckSameRingSettings(absl::string_view joining_id,
                                   absl::Span<const RingSetting> joining,
                                   absl::string_view member_id,
                                   absl::Span<const RingSetting> member) {
  std::vector<std::string> differences;
  std::vector<absl::string_view> flags;
  for (const RingSetting& mine : joining) {
    for (const RingSetting& theirs : member) {
      if (mine.flag != theirs.flag || mine.value == theirs.value) continue;
      differences.push_back(
          absl::StrCat(mine.flag, "=", mine.value, " where '", member_id, "' runs with ",
                       theirs.flag, "=", theirs.value));
      flags.push_back(mine.flag);
    }
  }
  if (differences.empty()) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "worker '", joining_id, "' runs with ", absl::StrJoin(differences, ", and with "),
      ", a live worker of the ring; every worker of a ring must run with the same ",
      absl::StrJoin(flags, ", "),
      " (ranks that differ fail every collective): restart '", joining_id,
      "' with the ring's values, or stop every worker to change them"));
}

}  // namespace ringsync
