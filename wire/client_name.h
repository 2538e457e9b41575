// How long a client's name for itself (AttachRequest.client_name) may be: the SDK refuses
// a longer one (ClientOptions::kMaxClientNameBytes, which must equal this), and a worker
// logs and quotes at most this much of what any client sends.
#pragma once

#include <cstddef>

namespace ringsync {

inline constexpr size_t kMaxClientNameBytes = 256;

}  // namespace ringsync
