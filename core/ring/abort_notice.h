// AbortNotice: one rank's side of the abort protocol in one collective, as the ring
// (ring_exchange.h) and the stride algorithms (stride_allreduce.h) run it: a rank that gives
// up sends a notice naming itself; a rank that receives one fails with the origin's reason
// and passes the notice on once; a notice never goes back out from its origin.
//
// Thread-safety: none; the collective's receiving thread takes notices, and NoticeToSend
// runs after its sender is joined.
#pragma once

#include <optional>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "core/collective.h"
#include "core/link/link.h"
#include "core/ring/ring_member.h"

namespace ringsync {

class AbortNotice {
 public:
  AbortNotice(const RingMember& me, const CollectiveSpec& spec) : me_(me), spec_(spec) {}

  // A notice of this collective arrived: AbortedBy its origin (collective.h) — or, for one
  // naming a rank outside this ring, InvalidArgument, and it is not passed on.
  absl::Status Take(const Frame& frame);

  // The notice this rank sends after failing for `cause`: the one it took, once, or else
  // its own (marked as given up before its commit unless `data_completed`); nullopt when
  // there is none to send (its own came back, or it was sent already).
  std::optional<Frame> ToSend(const absl::Status& cause, bool data_completed);

  // Whether the notice taken came from a rank that gave up before its data completed: it
  // sent no commit, so no rank can have returned OK.
  bool origin_before_commit() const { return origin_before_commit_; }

 private:
  const RingMember me_;
  const CollectiveSpec& spec_;
  bool aborted_ = false;  // a notice was taken, or this rank's own was made
  std::optional<Frame> to_forward_;
  bool origin_before_commit_ = false;
};

// The failure of a rank whose commit pass broke after its own data completed, when the
// notice it took (if any) does not prove that no rank returned OK: `cause`, told as an
// outcome in doubt that names the ranks whose completion this rank did not hear
// (`unheard`, "3, 0"); `buffer_state` ends it ("" or "; this rank's buffer is
// untouched"). The caller annotates it and marks it OutcomeMark::kInDoubt.
absl::Status CommitInDoubt(const absl::Status& cause, absl::string_view unheard,
                           absl::string_view buffer_state);

}  // namespace ringsync
