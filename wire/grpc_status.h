// absl::Status -> grpc::Status for handlers: same code (both are google.rpc.Code), same
// message.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "grpcpp/support/status.h"

namespace ringsync {

inline grpc::Status ToGrpc(const absl::Status& status) {
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

}  // namespace ringsync
