// What every frame and every failure of one rank's collective carries: which rank of which
// generation sent it, in which collective. One definition for the ring's exchange and the
// stride-link all-reduces, so that their frames and error texts cannot drift apart.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "core/collective.h"
#include "core/link/link.h"
#include "core/ring/ring_member.h"
#include "core/sync/cancellation.h"

namespace ringsync {

// A frame of `kind` from `me` in collective `sequence`, at (step, segment, chunk); the
// rest (offset, count, payload) is the caller's.
Frame StampedFrame(FrameKind kind, const RingMember& me, uint64_t sequence, int step, int segment,
                   int chunk);

// What a frame of `kind` is, for error texts: "a relay frame (agreement with data)".
std::string FrameKindName(FrameKind kind);

// Whether `kind` is the first frame an all-reduce algorithm sends (each algorithm has its
// own): a rank that receives another algorithm's knows the ranks chose differently.
bool IsAgreementKind(FrameKind kind);

// For a rank whose algorithm sends `own` first and received `frame`, another algorithm's
// first frame, from rank `from`: FailedPrecondition — the disagreement on the spec when
// the frame carries one that differs from `mine` (ranks whose sizes differ may choose
// different algorithms, and the size is the cause), else naming both algorithms and the
// flags that choose them.
absl::Status DifferentAlgorithmsError(const CollectiveSpec& mine, const RingMember& me,
                                      const Frame& frame, int from, FrameKind own);

// "rank R (generation G, <collective>[, <algorithm>]): <message>", same code; OK stays OK.
absl::Status AnnotateRankFailure(const absl::Status& status, const RingMember& me,
                                 const CollectiveSpec& spec, absl::string_view algorithm = "");

// A Cancelled `status` replaced by the reason the caller's `cancellation` was cancelled
// with (e.g. "the training process disconnected"), when there is one.
absl::Status ExplainCancel(absl::Status status, const Cancellation* cancellation);

}  // namespace ringsync
