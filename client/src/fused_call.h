// FusedCall: many tensors of one dtype, all-reduced with one op, described as ONE
// collective — the grouped call (Client::AllReduceGroup) and the SDK's async fusion
// (FusionQueue) both send what this builds.
//
// The tensors are packed one after another into the collective's buffer (straight into
// its shared-memory region when it has one: PendingCollective gathers the pieces), and
// the result is scattered back only when the whole ring completed. The collective's
// name is derived from the member list ("fused 161 tensors 'conv1.weight'..'fc.bias'
// #3f2a...", the digest covering every name and count) and the list itself travels in
// the spec (CollectiveSpec::members), so that the worker's agreement pass compares it
// across ranks and a mismatch names the first tensor that differs.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "client/src/collective_call.h"
#include "core/collective.h"
#include "ringsync/client.h"
#include "ringsync/group_tensor.h"

namespace ringsync::internal {

// A 64-bit FNV-1a digest of every member's name and count: the same on every machine
// (unlike absl::Hash, which is seeded per process).
uint64_t MembersDigest(absl::Span<const FusedMember> members);

// "fused 3 tensors 'fc1.weight'..'fc2.bias' #0123456789abcdef" (each quoted name cut to
// 40 bytes). REQUIRES: !members.empty().
std::string FusedName(absl::Span<const FusedMember> members);

// The all-reduce of `tensors` as one collective. InvalidArgument naming the tensor for an
// empty list, a tensor without a name, of another dtype than the first, or null with
// elements; the other checks are ValidateCall's.
absl::StatusOr<CollectiveCall> MakeFusedCall(absl::Span<const GroupTensor> tensors, ReduceOp op,
                                             const AllReduceOptions& options);

}  // namespace ringsync::internal
