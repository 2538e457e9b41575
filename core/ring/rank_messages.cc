#include "core/ring/rank_messages.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace ringsync {

Frame StampedFrame(FrameKind kind, const RingMember& me, uint64_t sequence, int step, int segment,
                   int chunk) {
  Frame frame;
  frame.kind = kind;
  frame.sender_rank = me.rank;
  frame.generation = me.generation;
  frame.sequence = sequence;
  frame.step = static_cast<uint32_t>(step);
  frame.segment = static_cast<uint32_t>(segment);
  frame.chunk = static_cast<uint32_t>(chunk);
  return frame;
}

absl::Status AnnotateRankFailure(const absl::Status& status, const RingMember& me,
                                 const CollectiveSpec& spec, absl::string_view algorithm) {
  if (status.ok()) return status;
  return absl::Status(status.code(),
                      absl::StrCat("rank ", me.rank, " (generation ", me.generation, ", ",
                                   DescribeCollective(spec), algorithm.empty() ? "" : ", ",
                                   algorithm, "): ", status.message()));
}

absl::Status ExplainCancel(absl::Status status, const Cancellation* cancellation) {
  if (status.code() == absl::StatusCode::kCancelled && cancellation != nullptr) {
    if (absl::Status why = cancellation->reason(); !why.ok()) return why;
  }
  return status;
}

}  // namespace ringsync
