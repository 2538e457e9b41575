// Reading values off a daemon's /metrics page (Prometheus text format) in end-to-end
// tests.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"

namespace ringsync::testing {

// The value of metrics text `page`'s series of `family` whose labels contain `labels`,
// summed; NotFound when none.
inline absl::StatusOr<double> SumMetric(absl::string_view page, absl::string_view family,
                                        absl::string_view labels = "") {
  double sum = 0;
  bool found = false;
  for (absl::string_view line : absl::StrSplit(page, '\n', absl::SkipEmpty())) {
    if (!absl::StartsWith(line, family) || line.size() <= family.size()) continue;
    const char after = line[family.size()];
    if (after != '{' && after != ' ') continue;  // another family with this prefix
    const size_t space = line.rfind(' ');
    if (!absl::StrContains(line.substr(0, space), labels)) continue;
    double value = 0;
    if (absl::SimpleAtod(line.substr(space + 1), &value)) {
      sum += value;
      found = true;
    }
  }
  if (!found) return absl::NotFoundError(absl::StrCat("no series of ", family, " with ", labels));
  return sum;
}

}  // namespace ringsync::testing
