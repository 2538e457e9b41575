#include "daemon/worker/ring_membership.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/outcome.h"

namespace ringsync {
namespace {

bool Contains(const std::vector<std::string>& ids, const std::string& id) {
  return std::find(ids.begin(), ids.end(), id) != ids.end();
}

}  // namespace

std::string MembershipChange::Describe() const {
  std::string text = absl::StrCat("generation ", from_generation, " (", from_size,
                                  " workers) -> generation ", to_generation);
  if (to_size == 0) {
    absl::StrAppend(&text, " (the ring dissolved; it re-forms with the workers that remain)");
  } else {
    absl::StrAppend(&text, " (", to_size, " workers)");
  }
  std::vector<std::string> parts;
  if (!left.empty()) parts.push_back(absl::StrCat(absl::StrJoin(left, ", "), " left"));
  if (!joined.empty()) parts.push_back(absl::StrCat(absl::StrJoin(joined, ", "), " joined"));
  if (parts.empty() && to_size != 0) parts.push_back("the same workers, re-formed after a loss");
  if (!parts.empty()) absl::StrAppend(&text, ": ", absl::StrJoin(parts, "; "));
  if (!reason.empty()) absl::StrAppend(&text, " (", reason, ")");
  return text;
}

bool RingMembership::OnView(const v1::RingView& view, int my_rank) {
  if (my_rank < 0) {
    if (!formed_.has_value() || broken_) return false;
    broken_ = true;
    Change(view.generation(), {}, view.dissolved_reason());
    return true;
  }
  std::vector<Member> members;
  for (const v1::RingMember& m : view.members()) members.push_back({m.worker_id(), m.peer_address(), m.incarnation()});
  bool changed = false;
  if (broken_) {
    // The change began when the ring dissolved (id_ names that view); say what it became.
    const uint64_t since = id_;
    Change(view.generation(), members, last_change_->reason);
    id_ = since;
  } else if (formed_.has_value() && members != *formed_) {
    Change(view.generation(), members, view.dissolved_reason());
    changed = true;
  }
  formed_ = std::move(members);
  formed_generation_ = view.generation();
  broken_ = false;
  return changed;
}

void RingMembership::Change(uint64_t generation, const std::vector<Member>& to,
                            std::string reason) {
  MembershipChange change;
  change.from_generation = formed_generation_;
  change.from_size = static_cast<int>(formed_->size());
  change.to_generation = generation;
  change.to_size = static_cast<int>(to.size());
  change.reason = std::move(reason);
  std::vector<std::string> before, after;
  for (const Member& m : *formed_) before.push_back(m.worker_id);
  for (const Member& m : to) after.push_back(m.worker_id);
  for (const std::string& id : before) {
    if (!to.empty() && !Contains(after, id)) change.left.push_back(id);
  }
  for (const std::string& id : after) {
    if (!Contains(before, id)) change.joined.push_back(id);
  }
  last_change_ = std::move(change);
  id_ = generation;
}

absl::Status MarkIfMembershipChanged(absl::Status failure, uint64_t job_membership,
                                     const MembershipSnapshot& now) {
  if (failure.ok() || job_membership == now.id) return failure;
  const std::string what = now.last_change.has_value()
                               ? now.last_change->Describe()
                               : absl::StrCat("membership of generation ", now.id);
  const OutcomeMark mark = OutcomeMarkOf(failure) == OutcomeMark::kInDoubt
                               ? OutcomeMark::kInDoubt
                               : OutcomeMark::kMembershipChanged;
  return WithOutcomeMark(
      absl::Status(failure.code(),
                   absl::StrCat(failure.message(), "; the ring's membership changed: ", what,
                                ". Re-synchronise the training state (ElasticState::Sync) "
                                "and continue")),
      mark);
}

}  // namespace ringsync
