// The ringsync protocol version this build speaks (ProtocolVersion in
// proto/ringsync/v1/common.proto). A coordinator refuses workers of another version, and
// a worker reports it to its clients.
#pragma once

#include "ringsync/v1/common.pb.h"

namespace ringsync {

inline constexpr v1::ProtocolVersion kProtocolVersion = v1::PROTOCOL_VERSION_5;

}  // namespace ringsync
