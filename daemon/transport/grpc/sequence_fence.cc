#include "daemon/transport/grpc/sequence_fence.h"

#include "absl/strings/str_cat.h"

namespace ringsync {

absl::Status SequenceFence::Admit(uint64_t sequence, bool first_on_stream) {
  if (sequence < newest_) {
    return absl::PermissionDeniedError(absl::StrCat(
        "frame of collective #", sequence, " after one of collective #", newest_,
        ": sequence numbers never go back"));
  }
  if (skips_collectives_) {
    newest_ = sequence;
    return absl::OkStatus();
  }
  // Written so that no sum can wrap: `sequence - newest_` is exact once sequence >= newest_.
  const uint64_t limit = first_on_stream ? kMaxSkipOnNewStream : 1;
  if (sequence - newest_ > limit) {
    return absl::PermissionDeniedError(absl::StrCat(
        "frame of collective #", sequence, " after collective #", newest_, ": a ",
        first_on_stream ? "new stream may skip at most " : "stream goes forward by at most ",
        limit, first_on_stream ? " collectives" : " collective at a time"));
  }
  newest_ = sequence;
  return absl::OkStatus();
}

}  // namespace ringsync
