#include "client/src/fused_call.h"

#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace ringsync::internal {
namespace {

constexpr size_t kNameInLabelBytes = 40;

void Mix(uint64_t& digest, absl::string_view bytes) {
  constexpr uint64_t kPrime = 0x100000001b3ULL;
  for (unsigned char c : bytes) {
    digest ^= c;
    digest *= kPrime;
  }
}

std::string Cut(absl::string_view name) {
  if (name.size() <= kNameInLabelBytes) return std::string(name);
  return absl::StrCat(name.substr(0, kNameInLabelBytes), "...");
}

absl::Status BadTensor(absl::Span<const GroupTensor> tensors, size_t i, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("grouped all-reduce of ", tensors.size(),
                                                 " tensors: tensor #", i, " '", Cut(tensors[i].name),
                                                 "' ", what));
}

}  // namespace

uint64_t MembersDigest(absl::Span<const FusedMember> members) {
  uint64_t digest = 0xcbf29ce484222325ULL;
  for (const FusedMember& member : members) {
    Mix(digest, member.name);
    // The name's end and the count in a fixed byte order, so "a" + 12 differs from "a1" + 2.
    char count[9] = {'\0'};
    for (int b = 0; b < 8; ++b) count[b + 1] = static_cast<char>(member.count >> (8 * b));
    Mix(digest, absl::string_view(count, sizeof(count)));
  }
  return digest;
}

std::string FusedName(absl::Span<const FusedMember> members) {
  return absl::StrFormat("fused %d tensors '%s'..'%s' #%016x", members.size(),
                         Cut(members.front().name), Cut(members.back().name),
                         MembersDigest(members));
}

absl::StatusOr<CollectiveCall> MakeFusedCall(absl::Span<const GroupTensor> tensors, ReduceOp op,
                                             const AllReduceOptions& options) {
  if (tensors.empty()) {
    return absl::InvalidArgumentError("grouped all-reduce of no tensors: pass at least one");
  }
  CollectiveCall call;
  call.spec.kind = CollectiveKind::kAllReduce;
  call.spec.dtype = tensors.front().dtype;
  call.spec.op = op;
  call.spec.pre_scale = options.pre_scale;
  call.spec.post_scale = options.post_scale;
  call.timeout = options.timeout;
  call.spec.members.reserve(tensors.size());
  call.pieces.reserve(tensors.size());
  const size_t element = IsValid(call.spec.dtype) ? DTypeSize(call.spec.dtype) : 1;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const GroupTensor& tensor = tensors[i];
    if (tensor.name.empty()) return BadTensor(tensors, i, "has no name; label every tensor");
    if (tensor.dtype != call.spec.dtype) {
      return BadTensor(tensors, i,
                       absl::StrCat("is ", DTypeName(tensor.dtype), " where tensor #0 is ",
                                    DTypeName(call.spec.dtype),
                                    "; group tensors of one dtype (one grouped call per dtype)"));
    }
    if (tensor.data == nullptr && tensor.count > 0) return BadTensor(tensors, i, "is null");
    size_t bytes = 0;
    if (__builtin_mul_overflow(tensor.count, element, &bytes) ||
        __builtin_add_overflow(call.spec.count, tensor.count, &call.spec.count)) {
      return BadTensor(tensors, i, "overflows the group's size");
    }
    call.spec.members.push_back({tensor.name, tensor.count});
    call.pieces.push_back({tensor.data, bytes});
  }
  call.spec.name = FusedName(call.spec.members);
  call.output_count = call.spec.count;
  return call;
}

}  // namespace ringsync::internal
