// Conversions between core types and the ringsync.v1 wire contract. Every value that
// arrives from the network passes through a From* function here, which validates it.
#pragma once

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "core/collective.h"
#include "ringsync/dtype.h"
#include "ringsync/v1/common.pb.h"
#include "ringsync/v1/coordinator.pb.h"
#include "wire/ring_setting.h"

namespace ringsync {

v1::DType ToProto(DType dtype);
v1::ReduceOp ToProto(ReduceOp op);
v1::CollectiveKind ToProto(CollectiveKind kind);
void ToProto(const CollectiveSpec& spec, v1::CollectiveSpec* out);
// Appends each setting (a worker's Join, the coordinator's status of a worker).
void ToProto(absl::Span<const RingSetting> settings,
             google::protobuf::RepeatedPtrField<v1::RingSetting>* out);

// InvalidArgument for unspecified or unknown enum values.
absl::StatusOr<DType> FromProto(v1::DType dtype);
absl::StatusOr<ReduceOp> FromProto(v1::ReduceOp op);
absl::StatusOr<CollectiveKind> FromProto(v1::CollectiveKind kind);
// Maps scale 0 (unset) to 1, then validates the spec (ValidateSpec).
absl::StatusOr<CollectiveSpec> FromProto(const v1::CollectiveSpec& spec);

}  // namespace ringsync
