// RingMembership: which workers this worker's collectives are running with, and when that
// changed. The training loop's state is only consistent across one membership: when a
// worker is evicted or admitted, or the ring dissolves (a member was lost, and may come
// back with its state gone), every collective issued for the old membership fails with
// OutcomeMark::kMembershipChanged (core/outcome.h) and the loop re-synchronises.
//
// A membership is named by an id: the generation of the view that began it, or 0 for the
// first ring this worker ever formed (whose training process has nothing to resync).
// A ring re-formed with the same workers (ids, addresses, incarnations), with no dissolution in
// between (a restarted coordinator's new generation), is the same membership.
//
// Thread-safety: none; RingManager guards it with its lock.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "ringsync/v1/common.pb.h"

namespace ringsync {

// The newest change of membership, as the failures it causes describe it.
struct MembershipChange {
  uint64_t from_generation = 0;  // the last formed ring of the old membership
  int from_size = 0;
  uint64_t to_generation = 0;    // the view that changed it
  int to_size = 0;               // 0: dissolved, no ring yet
  std::vector<std::string> left;    // worker ids
  std::vector<std::string> joined;  // worker ids
  std::string reason;               // the view's dissolved_reason, if any

  // "generation 5 (4 workers) -> generation 7 (3 workers): w2 left (worker w2 (rank 2)
  // missed heartbeats for 400ms)"
  std::string Describe() const;
};

// What collectives are judged against: the membership's id and its newest change.
struct MembershipSnapshot {
  uint64_t id = 0;
  std::optional<MembershipChange> last_change;
};

class RingMembership {
 public:
  // Applies a view newer than every one before; `my_rank` is this worker's place in it
  // (-1: left out, as in a dissolved view). Returns true when the membership changed.
  bool OnView(const v1::RingView& view, int my_rank);

  MembershipSnapshot snapshot() const { return {id_, last_change_}; }

 private:
  struct Member {
    std::string worker_id;
    std::string peer_address;
    uint64_t incarnation = 0;  // a restarted worker is another member, state lost
    bool operator==(const Member&) const = default;
  };

  void Change(uint64_t generation, const std::vector<Member>& to, std::string reason);

  uint64_t id_ = 0;
  std::optional<std::vector<Member>> formed_;  // the newest formed ring's members
  uint64_t formed_generation_ = 0;
  bool broken_ = false;  // a view left this worker out since formed_
  std::optional<MembershipChange> last_change_;
};

// `failure` (a collective of membership `job_membership`) marked kMembershipChanged when
// the membership is no longer that one, with the change described; unchanged otherwise.
// An in-doubt failure keeps its mark (the change is still described): another rank may
// have returned OK, which is what the training loop must hear first.
absl::Status MarkIfMembershipChanged(absl::Status failure, uint64_t job_membership,
                                     const MembershipSnapshot& now);

}  // namespace ringsync
