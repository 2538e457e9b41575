#include "core/collective.h"

#include <cmath>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/reduce/reducer.h"
#include "core/utf8.h"

namespace ringsync {
namespace {

absl::Status Invalid(absl::string_view what) { return absl::InvalidArgumentError(what); }

absl::Status CheckScale(absl::string_view field, double scale) {
  if (scale != 0) return absl::OkStatus();
  return Invalid(absl::StrCat(field, " is 0; scales must be non-zero (1 for none)"));
}

// The phrases IsAgreementMismatch looks for; every message of CheckAgreement has one.
constexpr absl::string_view kDifferentCollectives = "ranks called different collectives";
constexpr absl::string_view kSameArguments = "every rank must pass the same";

absl::Status ValidateMembers(const CollectiveSpec& spec) {
  if (spec.members.empty()) return absl::OkStatus();
  if (spec.kind != CollectiveKind::kAllReduce) {
    return Invalid(absl::StrCat("members are given for a ", CollectiveKindName(spec.kind),
                                "; only an all-reduce can be fused"));
  }
  if (spec.members.size() > kMaxFusedMembers) {
    return Invalid(absl::StrCat("members lists ", spec.members.size(), " tensors; at most ",
                                kMaxFusedMembers, " can be fused into one collective"));
  }
  uint64_t total = 0;
  size_t name_bytes = 0;
  for (size_t i = 0; i < spec.members.size(); ++i) {
    const FusedMember& member = spec.members[i];
    if (member.name.empty() || member.name.size() > kMaxCollectiveNameBytes) {
      return Invalid(absl::StrCat("members[", i, "].name is ", member.name.size(),
                                  " bytes long; 1 to ", kMaxCollectiveNameBytes, " are allowed"));
    }
    if (!IsValidUtf8(member.name)) {
      return Invalid(absl::StrCat("members[", i, "].name is not UTF-8 text"));
    }
    name_bytes += member.name.size();
    if (__builtin_add_overflow(total, member.count, &total)) {
      return Invalid("members' counts overflow");
    }
  }
  if (name_bytes > kMaxFusedMemberNameBytes) {
    return Invalid(absl::StrCat("members' names take ", name_bytes, " bytes; at most ",
                                kMaxFusedMemberNameBytes, " are allowed"));
  }
  if (total != spec.count) {
    return Invalid(absl::StrCat("members' counts add up to ", total, ", not to count ", spec.count));
  }
  return absl::OkStatus();
}

// Adds `counts` up into `total` unless that passes kMaxCollectiveElements.
bool SumWithin(const std::vector<uint64_t>& counts, uint64_t& total) {
  total = 0;
  for (uint64_t count : counts) {
    if (__builtin_add_overflow(total, count, &total) || total > kMaxCollectiveElements) {
      return false;
    }
  }
  return true;
}

absl::Status ValidateSplits(const CollectiveSpec& spec) {
  if (spec.send_counts.empty() && spec.receive_counts.empty()) return absl::OkStatus();
  if (spec.kind != CollectiveKind::kAllToAll) {
    return Invalid(absl::StrCat("split sizes are given for a ", CollectiveKindName(spec.kind),
                                "; only an all-to-all has them"));
  }
  if (spec.send_counts.size() != spec.receive_counts.size()) {
    return Invalid(absl::StrCat("send_counts lists ", spec.send_counts.size(),
                                " ranks but receive_counts ", spec.receive_counts.size(),
                                "; both list every rank"));
  }
  if (spec.send_counts.size() > kMaxAllToAllSplits) {
    return Invalid(absl::StrCat("split sizes list ", spec.send_counts.size(), " ranks; at most ",
                                kMaxAllToAllSplits, " are allowed"));
  }
  uint64_t sent = 0;
  uint64_t received = 0;
  if (!SumWithin(spec.send_counts, sent) || !SumWithin(spec.receive_counts, received)) {
    return Invalid("split sizes add up to more than 2^40 elements");
  }
  if (sent != spec.count) {
    return Invalid(absl::StrCat("send_counts add up to ", sent, ", not to count ", spec.count));
  }
  return absl::OkStatus();
}

// The spec without what an uneven all-to-all's ranks legitimately differ in.
CollectiveSpec WithoutCounts(CollectiveSpec spec) {
  spec.count = 0;
  spec.send_counts.clear();
  spec.receive_counts.clear();
  return spec;
}

std::string DescribeMember(const CollectiveSpec& spec, size_t i) {
  if (i >= spec.members.size()) {
    return absl::StrCat("no tensor #", i, " (its fused all-reduce holds ", spec.members.size(),
                        ")");
  }
  const FusedMember& member = spec.members[i];
  CollectiveSpec named;
  named.name = member.name;
  return absl::StrCat(QuotedName(named), " (", member.count, " x ", DTypeName(spec.dtype), ")");
}

// Two fused all-reduces at the same place whose member lists differ: the first tensor
// that differs, as each rank has it.
absl::Status MemberMismatch(const CollectiveSpec& mine, int my_rank, const CollectiveSpec& theirs,
                            int their_rank) {
  size_t i = 0;
  while (i < mine.members.size() && i < theirs.members.size() &&
         mine.members[i] == theirs.members[i]) {
    ++i;
  }
  return absl::FailedPreconditionError(absl::StrCat(
      DescribeCollective(mine), ": tensor #", i, " differs: rank ", my_rank, " has ",
      DescribeMember(mine, i), ", rank ", their_rank, " has ", DescribeMember(theirs, i), "; ",
      kSameArguments, " tensors, in the same order, to a fused all-reduce"));
}

}  // namespace

bool IsValid(CollectiveKind kind) {
  return kind >= CollectiveKind::kAllReduce && kind <= CollectiveKind::kAllToAll;
}

CollectiveKindTraits TraitsOf(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::kAllReduce: return {.reduces = true};
    case CollectiveKind::kBroadcast: return {.has_root = true};
    case CollectiveKind::kAllGather: return {.gathers = true};
    case CollectiveKind::kBarrier: return {.carries_data = false};
    case CollectiveKind::kReduceScatter: return {.reduces = true, .scatters = true};
    case CollectiveKind::kScatter: return {.has_root = true, .scatters = true};
    case CollectiveKind::kGather: return {.has_root = true, .gathers = true};
    case CollectiveKind::kAllToAll: return {.exchanges = true};
  }
  return {};
}

absl::Status ValidateSpec(const CollectiveSpec& spec) {
  if (!IsValid(spec.kind)) {
    return Invalid(absl::StrCat("kind ", static_cast<int>(spec.kind),
                                " is unknown; expected allreduce, broadcast, allgather, barrier, "
                                "reducescatter, scatter, gather or alltoall"));
  }
  if (spec.name.empty()) {
    return Invalid(
        "name is empty; label each collective, e.g. \"grad/fc1\", so that errors and "
        "mismatches between ranks can name it");
  }
  if (spec.name.size() > kMaxCollectiveNameBytes) {
    return Invalid(absl::StrCat("name is ", spec.name.size(), " bytes long; at most ",
                                kMaxCollectiveNameBytes, " are allowed"));
  }
  if (!IsValidUtf8(spec.name)) {
    return Invalid("name is not UTF-8 text (it travels as a protobuf string)");
  }
  if (!IsValid(spec.dtype)) {
    return Invalid(absl::StrCat("dtype ", static_cast<int>(spec.dtype), " is unknown"));
  }
  const CollectiveKindTraits traits = TraitsOf(spec.kind);
  if (spec.count > kMaxCollectiveElements) {
    return Invalid(absl::StrCat("count ", spec.count, " is more than 2^40 elements"));
  }
  if (!traits.carries_data && spec.count != 0) {
    return Invalid(absl::StrCat("count is ", spec.count, "; a ", CollectiveKindName(spec.kind),
                                " carries no data"));
  }
  if (traits.reduces) {
    if (absl::Status s = CheckScale("pre_scale", spec.pre_scale); !s.ok()) return s;
    if (absl::Status s = CheckScale("post_scale", spec.post_scale); !s.ok()) return s;
    const ReduceSpec reduce{spec.dtype, spec.op, /*world_size=*/1, spec.pre_scale,
                            spec.post_scale};
    if (absl::Status s = ValidateReduceSpec(reduce); !s.ok()) return s;
  }
  if (traits.has_root && spec.root < 0) {
    return Invalid(absl::StrCat("root ", spec.root, " is negative; it must be a rank"));
  }
  if (absl::Status s = ValidateSplits(spec); !s.ok()) return s;
  return ValidateMembers(spec);
}

std::optional<uint64_t> ResultElements(const CollectiveSpec& spec, int world_size) {
  if (HasUnevenBlocks(spec)) {
    uint64_t received = 0;
    if (world_size <= 0 || spec.receive_counts.size() != static_cast<size_t>(world_size) ||
        !SumWithin(spec.receive_counts, received)) {
      return std::nullopt;
    }
    return received;
  }
  const CollectiveKindTraits traits = TraitsOf(spec.kind);
  if (traits.scatters || traits.exchanges) {
    if (world_size <= 0 || spec.count % static_cast<uint64_t>(world_size) != 0) {
      return std::nullopt;
    }
    return traits.scatters ? spec.count / static_cast<uint64_t>(world_size) : spec.count;
  }
  if (!traits.gathers) return spec.count;
  uint64_t elements = 0;
  if (world_size < 0 ||
      __builtin_mul_overflow(spec.count, static_cast<uint64_t>(world_size), &elements)) {
    return std::nullopt;
  }
  return elements;
}

std::optional<uint64_t> WorkingElements(const CollectiveSpec& spec, int world_size) {
  const std::optional<uint64_t> result = ResultElements(spec, world_size);
  if (!result.has_value() || !HasUnevenBlocks(spec)) return result;
  return spec.count + *result;  // each at most kMaxCollectiveElements
}

absl::string_view CollectiveKindName(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::kAllReduce: return "allreduce";
    case CollectiveKind::kBroadcast: return "broadcast";
    case CollectiveKind::kAllGather: return "allgather";
    case CollectiveKind::kBarrier: return "barrier";
    case CollectiveKind::kReduceScatter: return "reducescatter";
    case CollectiveKind::kScatter: return "scatter";
    case CollectiveKind::kGather: return "gather";
    case CollectiveKind::kAllToAll: return "alltoall";
  }
  return "invalid-collective";
}

std::string DescribeShape(const CollectiveSpec& spec) {
  if (!TraitsOf(spec.kind).carries_data) return std::string(CollectiveKindName(spec.kind));
  std::string shape = absl::StrCat(CollectiveKindName(spec.kind), " ", spec.count, " x ",
                                   DTypeName(spec.dtype));
  switch (spec.kind) {
    case CollectiveKind::kAllReduce:
    case CollectiveKind::kReduceScatter:
      absl::StrAppend(&shape, " ", ReduceOpName(spec.op));
      if (spec.pre_scale != 1.0) absl::StrAppendFormat(&shape, " pre_scale=%g", spec.pre_scale);
      if (spec.post_scale != 1.0) absl::StrAppendFormat(&shape, " post_scale=%g", spec.post_scale);
      break;
    case CollectiveKind::kBroadcast:
    case CollectiveKind::kScatter:
      absl::StrAppend(&shape, " from root ", spec.root);
      break;
    case CollectiveKind::kGather:
      absl::StrAppend(&shape, " to root ", spec.root);
      break;
    case CollectiveKind::kAllToAll:
      if (HasUnevenBlocks(spec)) absl::StrAppend(&shape, " in uneven blocks");
      break;
    default:
      break;
  }
  return shape;
}

std::string QuotedName(const CollectiveSpec& spec) {
  const absl::string_view name = spec.name;
  // Messages travel as protobuf strings too: a name of other bytes is shown escaped, and
  // a long one is cut between two characters.
  const bool text = IsValidUtf8(name);
  const absl::string_view shown = text ? Utf8Prefix(name, kQuotedNameBytes)
                                       : name.substr(0, kQuotedNameBytes);
  return absl::StrCat("'", text ? std::string(shown) : absl::CHexEscape(shown),
                      shown.size() < name.size() ? "...'" : "'");
}

std::string DescribeCollective(const CollectiveSpec& spec) {
  return absl::StrCat("collective #", spec.sequence, " ", QuotedName(spec));
}

absl::Status CheckAgreement(const CollectiveSpec& mine, int my_rank, const CollectiveSpec& theirs,
                            int their_rank) {
  if (mine == theirs) return absl::OkStatus();
  // Uneven all-to-alls' counts differ by design: CheckAllToAllCounts matches them.
  if (HasUnevenBlocks(mine) && HasUnevenBlocks(theirs) &&
      WithoutCounts(mine) == WithoutCounts(theirs)) {
    return absl::OkStatus();
  }
  if (mine.sequence == theirs.sequence && !mine.members.empty() && !theirs.members.empty() &&
      mine.members != theirs.members) {
    return MemberMismatch(mine, my_rank, theirs, their_rank);
  }
  if (mine.sequence != theirs.sequence || mine.name != theirs.name) {
    return absl::FailedPreconditionError(absl::StrCat(
        kDifferentCollectives, ": rank ", my_rank, " is at ", DescribeCollective(mine),
        " (", DescribeShape(mine), "), rank ", their_rank, " is at ", DescribeCollective(theirs),
        " (", DescribeShape(theirs), "); every rank must issue the same collectives in the same order"));
  }
  return absl::FailedPreconditionError(
      absl::StrCat(DescribeCollective(mine), ": rank ", my_rank, " has ", DescribeShape(mine),
                   ", rank ", their_rank, " has ", DescribeShape(theirs),
                   "; ", kSameArguments, " count, dtype, op and root"));
}

absl::Status CheckAllToAllCounts(const std::vector<CollectiveSpec>& specs) {
  const size_t n = specs.size();
  for (size_t q = 0; q < n; ++q) {
    for (size_t r = 0; r < n; ++r) {
      const CollectiveSpec& from = specs[q];
      const CollectiveSpec& to = specs[r];
      if (from.send_counts.size() != n || to.receive_counts.size() != n) {
        const CollectiveSpec& short_one = from.send_counts.size() != n ? from : to;
        return absl::FailedPreconditionError(absl::StrCat(
            DescribeCollective(short_one), ": rank ", &short_one == &from ? q : r, " gave ",
            short_one.send_counts.size(), " split sizes for a ring of ", n, " ranks; ",
            kSameArguments, " number of split sizes, one per rank"));
      }
      if (from.send_counts[r] != to.receive_counts[q]) {
        return absl::FailedPreconditionError(absl::StrCat(
            DescribeCollective(from), ": rank ", q, " sends ", from.send_counts[r],
            " elements to rank ", r, ", which expects ", to.receive_counts[q], " from it; ",
            kSameArguments, " size for each pair of ranks (rank q's input split for rank r is "
            "rank r's output split for rank q)"));
      }
    }
  }
  return absl::OkStatus();
}

namespace {

// Whether `message` is (or quotes) one of CheckAgreement's.
bool NamesDisagreement(absl::string_view message) {
  return absl::StrContains(message, kDifferentCollectives) ||
         absl::StrContains(message, kSameArguments);
}

}  // namespace

bool IsAgreementMismatch(const absl::Status& status) {
  return absl::IsFailedPrecondition(status) && NamesDisagreement(status.message());
}

absl::Status AbortedBy(int origin, absl::string_view reason) {
  const std::string message = absl::StrCat("rank ", origin, " gave up: ", reason);
  return NamesDisagreement(reason) ? absl::FailedPreconditionError(message)
                                   : absl::AbortedError(message);
}

}  // namespace ringsync
