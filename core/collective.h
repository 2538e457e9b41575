// What a collective is, as every rank must agree on it before any byte is combined.
//
// Ranks exchange their CollectiveSpec with the first frame of every collective; a
// disagreement fails the collective on every rank with both sides quoted, e.g.
//   collective #17 'grad/fc1': rank 2 has allreduce 1024 x float32 sum,
//   rank 1 has allreduce 1000 x float32 sum
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "ringsync/collective_kind.h"
#include "ringsync/dtype.h"

namespace ringsync {

bool IsValid(CollectiveKind kind);
absl::string_view CollectiveKindName(CollectiveKind kind);

// What a kind takes and what it returns, so that the SDK, the worker and the ring engine
// read one table instead of each switching on kind.
struct CollectiveKindTraits {
  bool reduces = false;      // op, pre_scale and post_scale apply (all-reduce)
  bool has_root = false;     // root applies (broadcast, scatter, gather)
  bool carries_data = true;  // false: a barrier, whose count is 0
  bool gathers = false;      // the result holds world_size x count elements (all-gather;
                             // gather: on the root only)
  bool scatters = false;     // the result holds count / world_size elements, the rank's
                             // block of the input (reduce-scatter; scatter: of the root's)
  bool exchanges = false;    // block r of each rank's input goes to rank r, whose result
                             // holds rank q's as its block q: count elements, in place
                             // (all-to-all)
};
// REQUIRES: IsValid(kind).
CollectiveKindTraits TraitsOf(CollectiveKind kind);

// Bounds on what a collective may name and carry, the same for every layer.
inline constexpr size_t kMaxCollectiveNameBytes = 1024;
inline constexpr uint64_t kMaxCollectiveElements = uint64_t{1} << 40;
// A fused all-reduce's member list travels in every agreement frame: bounded so that it
// stays a small part of one (ResNet-50's 161 tensors take ~6 KiB).
inline constexpr size_t kMaxFusedMembers = 16384;
inline constexpr size_t kMaxFusedMemberNameBytes = 256 * 1024;  // all names together
// An uneven all-to-all's split sizes (one per rank) travel in every agreement frame too.
inline constexpr size_t kMaxAllToAllSplits = 4096;

// One tensor of a fused all-reduce: the tensors lie one after another in its buffer, in
// member order, and each rank must list the same ones.
struct FusedMember {
  std::string name;
  uint64_t count = 0;

  friend bool operator==(const FusedMember&, const FusedMember&) = default;
};

struct CollectiveSpec {
  CollectiveKind kind = CollectiveKind::kAllReduce;
  std::string name;       // the caller's label, e.g. "grad/fc1"
  uint64_t sequence = 0;  // position in this generation's stream of collectives
  DType dtype = DType::kFloat32;
  uint64_t count = 0;     // elements per rank
  ReduceOp op = ReduceOp::kSum;
  int root = 0;           // broadcast only
  double pre_scale = 1.0;
  double post_scale = 1.0;
  // Non-empty for a fused all-reduce: its tensors, whose counts add up to `count`.
  std::vector<FusedMember> members;
  // Non-empty for an all-to-all of uneven blocks (MPI_Alltoallv's form): the elements this
  // rank sends to and receives from each rank, by rank, one of each per rank of the ring;
  // `count` is the sum of send_counts. Its input (count elements, block r for rank r) and
  // its result (rank q's block for this rank as block q) are separate buffers. Rank q's
  // send_counts[r] must be rank r's receive_counts[q]. Empty for an all-to-all of N equal
  // blocks, in place, and for every other kind.
  std::vector<uint64_t> send_counts;
  std::vector<uint64_t> receive_counts;

  friend bool operator==(const CollectiveSpec&, const CollectiveSpec&) = default;
};

// Whether `spec` is an all-to-all of uneven blocks (CollectiveSpec::send_counts).
inline bool HasUnevenBlocks(const CollectiveSpec& spec) {
  return spec.kind == CollectiveKind::kAllToAll && !spec.send_counts.empty();
}

// The checks every layer makes of a spec, whoever built it (the SDK from its caller's
// arguments, the worker from a request, a rank from its neighbour's first frame): a known
// kind and dtype; a name of 1 to kMaxCollectiveNameBytes bytes of UTF-8 text; at most
// kMaxCollectiveElements elements, none for a barrier; for an all-reduce the reducers'
// rules (a known op, finite scales, none on integer types) and non-zero scales (the wire
// says "unset" with 0, so a real 0 would silently become 1); for a broadcast a root >= 0
// (that it is a rank of the ring is checked against the ring); members only on an
// all-reduce, at most kMaxFusedMembers with names as the spec's
// (kMaxFusedMemberNameBytes in all) whose counts add up to count; split sizes only on an
// all-to-all, as many sends as receives (1 to kMaxAllToAllSplits), the sends adding up to
// count and the receives to at most kMaxCollectiveElements. The sequence is not
// checked: the ring assigns it. InvalidArgument whose message starts with the field,
// e.g. "name is empty; ...".
absl::Status ValidateSpec(const CollectiveSpec& spec);

// Elements of the result on each rank: count, world_size x count for an all-gather (and a
// gather's root; its other ranks have none), count / world_size for a reduce-scatter or a
// scatter, or the sum of an uneven all-to-all's receive_counts; nullopt when that
// overflows, when their count (or an even all-to-all's) is not a multiple of world_size,
// when an uneven all-to-all's splits are not one per rank (or world_size is not positive).
std::optional<uint64_t> ResultElements(const CollectiveSpec& spec, int world_size);

// The elements a worker holds for a collective: the result's, but an uneven all-to-all's
// input and result side by side (input first). nullopt as ResultElements.
std::optional<uint64_t> WorkingElements(const CollectiveSpec& spec, int world_size);

// "allreduce 1024 x float32 sum" — the part two ranks compare; "barrier" for a barrier.
std::string DescribeShape(const CollectiveSpec& spec);

// "collective #17 'grad/fc1'".
std::string DescribeCollective(const CollectiveSpec& spec);

// The name as messages quote it: whole up to kQuotedNameBytes, else cut between two
// characters and marked "...", so a long name cannot crowd out the rest of an error; a
// name that is not UTF-8 text (which ValidateSpec refuses) escaped, so that the message
// stays text.
inline constexpr size_t kQuotedNameBytes = 128;
std::string QuotedName(const CollectiveSpec& spec);

// OK when the specs match; else FailedPrecondition quoting both ranks' view. For two fused
// all-reduces whose member lists differ it names the first tensor that differs, e.g.
//   collective #17 'fused 3 tensors ...': tensor #1 differs: rank 2 has 'fc1.bias' (10 x
//   float32), rank 1 has 'fc2.bias' (10 x float32); every rank must pass the same ...
absl::Status CheckAgreement(const CollectiveSpec& mine, int my_rank, const CollectiveSpec& theirs,
                            int their_rank);
// For uneven all-to-alls, whose ranks' specs differ in their counts by design (which
// CheckAgreement leaves out): `specs` by rank, each agreed with CheckAgreement; OK when
// every rank q sends rank r what r expects from q. Else FailedPrecondition naming the
// first pair (by q, then r) that does not match, the same on every rank that holds the
// same specs.
absl::Status CheckAllToAllCounts(const std::vector<CollectiveSpec>& specs);

// True for a status CheckAgreement returned (ranks disagreed on a collective), also as a
// worker reports it: the phrases below are part of its message.
bool IsAgreementMismatch(const absl::Status& status);

// How a rank reports that rank `origin` gave the collective up for `reason` (an abort
// notice): Aborted, "rank 2 gave up: ..."; but FailedPrecondition when the reason is a
// disagreement (IsAgreementMismatch), so that every rank reports a disagreement alike
// whether it found it itself or heard of it — ranks whose sizes differ may run different
// algorithms, and then only some find it themselves.
absl::Status AbortedBy(int origin, absl::string_view reason);

}  // namespace ringsync
