// A worker flag that every worker of a ring must set alike, as a worker states it when
// it joins (JoinRequest.ring_settings) and the coordinator compares it with the live
// workers' (daemon/coordinator/ring_settings.h).
#pragma once

#include <cstddef>
#include <string>

namespace ringsync {

struct RingSetting {
  std::string flag;   // as on the command line, e.g. "--segment_bytes"
  std::string value;  // as the worker runs with it, e.g. "1048576"
};

// The bounds a Join's settings must keep (the coordinator refuses the Join otherwise).
inline constexpr size_t kMaxRingSettings = 16;
inline constexpr size_t kMaxRingSettingFlagBytes = 64;  // "--" included
inline constexpr size_t kMaxRingSettingValueBytes = 64;

}  // namespace ringsync
