#include "wire/proto_convert.h"

#include "absl/strings/str_cat.h"

namespace ringsync {

v1::DType ToProto(DType dtype) { return static_cast<v1::DType>(dtype); }
v1::ReduceOp ToProto(ReduceOp op) { return static_cast<v1::ReduceOp>(op); }
v1::CollectiveKind ToProto(CollectiveKind kind) { return static_cast<v1::CollectiveKind>(kind); }

absl::StatusOr<DType> FromProto(v1::DType dtype) {
  const auto value = static_cast<DType>(dtype);
  if (!IsValid(value)) {
    return absl::InvalidArgumentError(absl::StrCat("unknown dtype ", static_cast<int>(dtype)));
  }
  return value;
}

absl::StatusOr<ReduceOp> FromProto(v1::ReduceOp op) {
  const auto value = static_cast<ReduceOp>(op);
  if (!IsValid(value)) {
    return absl::InvalidArgumentError(absl::StrCat("unknown reduce op ", static_cast<int>(op)));
  }
  return value;
}

absl::StatusOr<CollectiveKind> FromProto(v1::CollectiveKind kind) {
  if (kind < v1::COLLECTIVE_KIND_ALL_REDUCE || kind > v1::COLLECTIVE_KIND_ALL_TO_ALL) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown collective kind ", static_cast<int>(kind)));
  }
  return static_cast<CollectiveKind>(kind);
}

void ToProto(const CollectiveSpec& spec, v1::CollectiveSpec* out) {
  out->set_kind(ToProto(spec.kind));
  out->set_name(spec.name);
  out->set_sequence(spec.sequence);
  out->set_dtype(ToProto(spec.dtype));
  out->set_count(spec.count);
  out->set_op(ToProto(spec.op));
  out->set_root(spec.root);
  out->set_pre_scale(spec.pre_scale);
  out->set_post_scale(spec.post_scale);
  for (const FusedMember& member : spec.members) {
    v1::FusedMember* wire = out->add_members();
    wire->set_name(member.name);
    wire->set_count(member.count);
  }
  out->mutable_send_counts()->Add(spec.send_counts.begin(), spec.send_counts.end());
  out->mutable_receive_counts()->Add(spec.receive_counts.begin(), spec.receive_counts.end());
}

void ToProto(absl::Span<const RingSetting> settings,
             google::protobuf::RepeatedPtrField<v1::RingSetting>* out) {
  for (const RingSetting& setting : settings) {
    v1::RingSetting* s = out->Add();
    s->set_flag(setting.flag);
    s->set_value(setting.value);
  }
}

absl::StatusOr<CollectiveSpec> FromProto(const v1::CollectiveSpec& in) {
  CollectiveSpec spec;
  absl::StatusOr<CollectiveKind> kind = FromProto(in.kind());
  if (!kind.ok()) return kind.status();
  absl::StatusOr<DType> dtype = FromProto(in.dtype());
  if (!dtype.ok()) return dtype.status();
  spec.kind = *kind;
  spec.dtype = *dtype;
  if (TraitsOf(spec.kind).reduces) {
    absl::StatusOr<ReduceOp> op = FromProto(in.op());
    if (!op.ok()) return op.status();
    spec.op = *op;
  }
  spec.name = in.name();
  spec.sequence = in.sequence();
  spec.count = in.count();
  spec.root = in.root();
  spec.pre_scale = in.pre_scale() == 0 ? 1.0 : in.pre_scale();
  spec.post_scale = in.post_scale() == 0 ? 1.0 : in.post_scale();
  if (in.members_size() > static_cast<int>(kMaxFusedMembers)) {
    return absl::InvalidArgumentError(absl::StrCat("members lists ", in.members_size(),
                                                   " tensors; at most ", kMaxFusedMembers,
                                                   " can be fused into one collective"));
  }
  spec.members.reserve(in.members_size());
  for (const v1::FusedMember& member : in.members()) {
    spec.members.push_back({member.name(), member.count()});
  }
  if (in.send_counts_size() > static_cast<int>(kMaxAllToAllSplits) ||
      in.receive_counts_size() > static_cast<int>(kMaxAllToAllSplits)) {
    return absl::InvalidArgumentError(absl::StrCat("split sizes list more than ",
                                                   kMaxAllToAllSplits, " ranks"));
  }
  spec.send_counts.assign(in.send_counts().begin(), in.send_counts().end());
  spec.receive_counts.assign(in.receive_counts().begin(), in.receive_counts().end());
  if (absl::Status valid = ValidateSpec(spec); !valid.ok()) return valid;
  return spec;
}

}  // namespace ringsync
