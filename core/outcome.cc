#include "core/outcome.h"

#include <string>

#include "absl/strings/cord.h"

namespace ringsync {

absl::string_view OutcomeMarkName(OutcomeMark mark) {
  switch (mark) {
    case OutcomeMark::kNone:
      return "";
    case OutcomeMark::kMembershipChanged:
      return "membership_changed";
    case OutcomeMark::kInDoubt:
      return "in_doubt";
  }
  return "";
}

std::optional<OutcomeMark> ParseOutcomeMark(absl::string_view name) {
  for (OutcomeMark mark : {OutcomeMark::kMembershipChanged, OutcomeMark::kInDoubt}) {
    if (name == OutcomeMarkName(mark)) return mark;
  }
  return std::nullopt;
}

absl::Status WithOutcomeMark(absl::Status status, OutcomeMark mark) {
  if (status.ok()) return status;
  if (mark == OutcomeMark::kNone) {
    status.ErasePayload(kOutcomePayloadUrl);
  } else {
    status.SetPayload(kOutcomePayloadUrl, absl::Cord(OutcomeMarkName(mark)));
  }
  return status;
}

OutcomeMark OutcomeMarkOf(const absl::Status& status) {
  if (status.ok()) return OutcomeMark::kNone;
  auto payload = status.GetPayload(kOutcomePayloadUrl);
  if (!payload.has_value()) return OutcomeMark::kNone;
  return ParseOutcomeMark(std::string(*payload)).value_or(OutcomeMark::kNone);
}

}  // namespace ringsync
