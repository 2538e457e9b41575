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

std::string FrameKindName(FrameKind kind) {
  switch (kind) {
    case FrameKind::kSegment: return "a data segment";
    case FrameKind::kAbort: return "an abort";
    case FrameKind::kAgree: return "an agreement frame (the ring)";
    case FrameKind::kCommit: return "a commit frame";
    case FrameKind::kRelay: return "a relay frame (agreement with data)";
    case FrameKind::kGather: return "a doubling frame (agreement with data)";
    case FrameKind::kDirect: return "a direct-exchange frame (agreement with data)";
  }
  return absl::StrCat("a frame of unknown kind ", static_cast<int>(kind));
}

bool IsAgreementKind(FrameKind kind) {
  return kind == FrameKind::kAgree || kind == FrameKind::kRelay || kind == FrameKind::kGather ||
         kind == FrameKind::kDirect;
}

absl::Status DifferentAlgorithmsError(const CollectiveSpec& mine, const RingMember& me,
                                      const Frame& frame, int from, FrameKind own) {
  if (frame.spec.has_value()) {
    if (absl::Status s = CheckAgreement(mine, me.rank, *frame.spec, static_cast<int>(frame.chunk));
        !s.ok()) {
      return s;
    }
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "ranks chose different all-reduce algorithms: rank ", from, " sent ",
      FrameKindName(frame.kind), " where this rank's algorithm expects ", FrameKindName(own),
      "; give every worker the same --algorithm, --relay_max_bytes, --doubling_max_bytes and "
      "--direct_max_ranks"));
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
