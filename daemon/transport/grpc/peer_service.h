// The receiving side of the ring's data path: the Peer service accepts the incoming
// RingStream of the left neighbour and feeds its frames into the PeerInbox of that
// stream's generation.
//
// A stream may arrive before this worker has learned the generation it names (the
// sender heard of the new ring view first), so inboxes are created on first use by
// either side; generations older than the newest retired one are refused.
#pragma once

#include <cstdint>
#include <map>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "daemon/transport/grpc/peer_inbox.h"
#include "ringsync/v1/peer.grpc.pb.h"
#include "wire/security/token_check.h"

namespace ringsync {

// Thread-safety: all methods are safe from any thread.
class InboxRegistry {
 public:
  explicit InboxRegistry(size_t inbox_capacity) : inbox_capacity_(inbox_capacity) {}

  // The inbox of `generation`, created on first use. FailedPrecondition for a retired one.
  absl::StatusOr<std::shared_ptr<PeerInbox>> Get(uint64_t generation);

  // Closes and forgets every inbox of a generation below `generation`; refuses them from now on.
  void RetireBefore(uint64_t generation, const absl::Status& why);

  // Closes everything (server shutdown).
  void CloseAll(const absl::Status& why);

 private:
  const size_t inbox_capacity_;
  absl::Mutex mu_;
  std::map<uint64_t, std::shared_ptr<PeerInbox>> inboxes_ ABSL_GUARDED_BY(mu_);
  uint64_t retired_below_ ABSL_GUARDED_BY(mu_) = 0;
};

// Who may open a ring stream, besides what the inbox's ring view says.
struct HelloPolicy {
  // Mutual TLS: a hello as worker W must come from a certificate that names W.
  bool require_certificates = false;
  RefusalReporter refusals;  // hears of every refused hello; null: not reported
};

class PeerService final : public v1::Peer::WithRawCallbackMethod_RingStream<v1::Peer::Service> {
 public:
  explicit PeerService(InboxRegistry& registry, HelloPolicy policy = {})
      : registry_(registry), policy_(std::move(policy)) {}

  grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* RingStream(
      grpc::CallbackServerContext* context) override;

 private:
  InboxRegistry& registry_;
  const HelloPolicy policy_;  // read by the streams, which end before this service
};

}  // namespace ringsync
