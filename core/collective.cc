#include "core/collective.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace ringsync {

absl::string_view CollectiveKindName(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::kAllReduce: return "allreduce";
    case CollectiveKind::kBroadcast: return "broadcast";
    case CollectiveKind::kAllGather: return "allgather";
    case CollectiveKind::kBarrier: return "barrier";
  }
  return "invalid-collective";
}

std::string DescribeShape(const CollectiveSpec& spec) {
  std::string shape = absl::StrCat(CollectiveKindName(spec.kind), " ", spec.count, " x ",
                                   DTypeName(spec.dtype));
  switch (spec.kind) {
    case CollectiveKind::kAllReduce:
      absl::StrAppend(&shape, " ", ReduceOpName(spec.op));
      if (spec.pre_scale != 1.0) absl::StrAppendFormat(&shape, " pre_scale=%g", spec.pre_scale);
      if (spec.post_scale != 1.0) absl::StrAppendFormat(&shape, " post_scale=%g", spec.post_scale);
      break;
    case CollectiveKind::kBroadcast:
      absl::StrAppend(&shape, " from root ", spec.root);
      break;
    default:
      break;
  }
  return shape;
}

std::string DescribeCollective(const CollectiveSpec& spec) {
  return absl::StrCat("collective #", spec.sequence, " '", spec.name, "'");
}

absl::Status CheckAgreement(const CollectiveSpec& mine, int my_rank, const CollectiveSpec& theirs,
                            int their_rank) {
  if (mine == theirs) return absl::OkStatus();
  if (mine.sequence != theirs.sequence || mine.name != theirs.name) {
    return absl::FailedPreconditionError(absl::StrCat(
        "ranks called different collectives: rank ", my_rank, " is at ", DescribeCollective(mine),
        " (", DescribeShape(mine), "), rank ", their_rank, " is at ", DescribeCollective(theirs),
        " (", DescribeShape(theirs), "); every rank must issue the same collectives in the same order"));
  }
  return absl::FailedPreconditionError(
      absl::StrCat(DescribeCollective(mine), ": rank ", my_rank, " has ", DescribeShape(mine),
                   ", rank ", their_rank, " has ", DescribeShape(theirs),
                   "; every rank must pass the same count, dtype, op and root"));
}

}  // namespace ringsync
