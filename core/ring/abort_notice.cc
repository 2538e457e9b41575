#include "core/ring/abort_notice.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"

namespace ringsync {

absl::Status AbortNotice::Take(const Frame& frame) {
  if (frame.abort_origin < 0 || frame.abort_origin >= me_.world_size) {
    // Not from this ring: fail this collective for what it is, and forward nothing.
    return absl::InvalidArgumentError(absl::StrCat(
        "rank ", frame.sender_rank, " sent an abort frame naming rank ", frame.abort_origin,
        ", which is not in this ring of ", me_.world_size));
  }
  aborted_ = true;
  origin_before_commit_ = frame.abort_before_commit;
  if (frame.abort_origin != me_.rank) to_forward_ = frame;
  return AbortedBy(frame.abort_origin, frame.abort_reason);
}

std::optional<Frame> AbortNotice::ToSend(const absl::Status& cause, bool data_completed) {
  if (me_.world_size < 2) return std::nullopt;
  Frame frame;
  if (aborted_) {
    if (!to_forward_.has_value()) return std::nullopt;  // this rank's own came back
    frame = *std::exchange(to_forward_, std::nullopt);
  } else {
    frame.kind = FrameKind::kAbort;
    frame.generation = me_.generation;
    frame.sequence = spec_.sequence;
    frame.abort_origin = me_.rank;
    frame.abort_reason = std::string(cause.message().substr(0, kMaxAbortReasonBytes));
    frame.abort_before_commit = !data_completed;
    aborted_ = true;
  }
  frame.sender_rank = me_.rank;
  return frame;
}

absl::Status CommitInDoubt(const absl::Status& cause, absl::string_view unheard,
                           absl::string_view buffer_state) {
  return absl::Status(
      cause.code(),
      absl::StrCat("outcome in doubt: this rank completed its part, but the ring broke before it "
                   "heard that rank(s) ",
                   unheard, " completed theirs (", cause.message(),
                   "); another rank may have returned OK, so resynchronise rather than retry",
                   buffer_state));
}

}  // namespace ringsync
