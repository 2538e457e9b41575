#include "daemon/worker/ring_epoch.h"

#include "absl/strings/str_cat.h"

namespace ringsync {

std::string RingEpoch::Describe(int rank) const {
  if (rank < 0 || rank >= static_cast<int>(worker_ids.size())) return absl::StrCat("rank ", rank);
  return absl::StrCat("rank ", rank, " (worker ", worker_ids[rank], ")");
}

}  // namespace ringsync
