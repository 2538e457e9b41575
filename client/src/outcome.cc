#include "ringsync/outcome.h"

#include "core/outcome.h"

namespace ringsync {

bool IsMembershipChanged(const absl::Status& status) {
  return OutcomeMarkOf(status) == OutcomeMark::kMembershipChanged;
}

bool IsInDoubt(const absl::Status& status) {
  return OutcomeMarkOf(status) == OutcomeMark::kInDoubt;
}

}  // namespace ringsync
