// The trailer a worker adds to a failed collective that ran on a registered buffer
// (worker.proto, CollectiveRequest.registered): "untouched" when the ring never wrote into
// the buffer (it still holds the caller's input), "unspecified" when it may have (each
// element holds its input, a partial reduction or the result). The SDK turns it into the
// status payload that ringsync::RegisteredBufferUntouched reads.
#pragma once

namespace ringsync {

inline constexpr char kRegisteredBufferMetadataKey[] = "ringsync-registered-buffer";

}  // namespace ringsync
