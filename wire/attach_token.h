// The metadata key under which a client's requests carry its attach token
// (WorkerEvent.attach_token in proto/ringsync/v1/worker.proto): the worker serves only
// requests that carry the token of the training process attached to it.
#pragma once

namespace ringsync {

inline constexpr char kAttachTokenMetadata[] = "ringsync-attach-token";

}  // namespace ringsync
