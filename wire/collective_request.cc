#include "wire/collective_request.h"

#include "absl/strings/str_cat.h"
#include "wire/proto_convert.h"

namespace ringsync {
namespace {

// The flat fields of requests from SDKs that predate `spec`.
v1::CollectiveSpec FromFlatFields(const v1::CollectiveRequest& request) {
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  v1::CollectiveSpec spec;
  spec.set_name(request.name());
  spec.set_dtype(request.dtype());
  spec.set_count(request.count());
  spec.set_op(request.op());
  spec.set_root(request.root());
  spec.set_pre_scale(request.pre_scale());
  spec.set_post_scale(request.post_scale());
  return spec;
#pragma GCC diagnostic pop
}

}  // namespace

absl::StatusOr<CollectiveSpec> SpecOfRequest(CollectiveKind rpc_kind,
                                             const v1::CollectiveRequest& request) {
  v1::CollectiveSpec wire = request.has_spec() ? request.spec() : FromFlatFields(request);
  if (wire.kind() == v1::COLLECTIVE_KIND_UNSPECIFIED) wire.set_kind(ToProto(rpc_kind));
  if (wire.kind() != ToProto(rpc_kind)) {
    const absl::StatusOr<CollectiveKind> kind = FromProto(wire.kind());
    if (!kind.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("spec.kind ", static_cast<int>(wire.kind()), " is unknown"));
    }
    return absl::InvalidArgumentError(absl::StrCat("spec.kind is ", CollectiveKindName(*kind),
                                                   " but the request came by the ",
                                                   CollectiveKindName(rpc_kind), " RPC"));
  }
  // A barrier carries no elements, so their type is whatever the caller left.
  if (!TraitsOf(rpc_kind).carries_data) wire.set_dtype(v1::DTYPE_UINT8);
  wire.set_sequence(0);
  return FromProto(wire);
}

void SetRequestSpec(const CollectiveSpec& spec, v1::CollectiveRequest* request) {
  ToProto(spec, request->mutable_spec());
  request->mutable_spec()->clear_sequence();
}

}  // namespace ringsync
