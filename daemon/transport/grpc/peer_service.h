// The receiving side of the ring's data path: the Peer service accepts the incoming
// RingStream of the left neighbour and feeds its frames into the PeerInbox of that
// stream's generation.
//
// A stream may arrive before this worker has learned the generation it names (the
// sender heard of the new ring view first), so an inbox may be opened ahead — for one
// generation at most, newer than every generation this worker knows; when the worker
// learns its view (Expect), an inbox opened ahead for another generation is dropped and
// the expected one accepts only the neighbour the view names. Generations older than the
// newest retired one are refused. So a worker holds at most two inboxes, whatever peers
// send.
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
  // A stream ended because the view names another sender is reported to `refusals`
  // (null: not reported).
  // `mailbox_spin`: see PeerInbox.
  explicit InboxRegistry(size_t inbox_capacity, RefusalReporter refusals = nullptr,
                         absl::Duration mailbox_spin = absl::ZeroDuration())
      : inbox_capacity_(inbox_capacity),
        refusals_(std::move(refusals)),
        mailbox_spin_(mailbox_spin) {}

  // The inbox of `generation` for this worker's own link, whose view names `sender` as
  // the left neighbour (see PeerInbox::Expect). Drops an inbox opened ahead for another
  // generation. FailedPrecondition for a retired generation.
  absl::StatusOr<std::shared_ptr<PeerInbox>> Expect(uint64_t generation,
                                                    const ExpectedSender& sender);

  // The inbox a hello of `generation` attaches to: the expected one, or the one opened
  // ahead. FailedPrecondition for a retired generation, ResourceExhausted when another
  // generation is already open ahead.
  absl::StatusOr<std::shared_ptr<PeerInbox>> ForHello(uint64_t generation);

  // Closes and forgets every inbox of a generation below `generation`; refuses them from now on.
  void RetireBefore(uint64_t generation, const absl::Status& why);

  // Closes everything (server shutdown).
  void CloseAll(const absl::Status& why);

 private:
  // FailedPrecondition when `generation` is retired or older than the expected one.
  absl::Status CheckNotOver(uint64_t generation) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const size_t inbox_capacity_;
  const RefusalReporter refusals_;
  const absl::Duration mailbox_spin_;
  absl::Mutex mu_;
  uint64_t retired_below_ ABSL_GUARDED_BY(mu_) = 0;
  // The generation this worker's own link is in (Expect), and an inbox opened ahead.
  uint64_t expected_generation_ ABSL_GUARDED_BY(mu_) = 0;
  std::shared_ptr<PeerInbox> expected_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<PeerInbox> ahead_ ABSL_GUARDED_BY(mu_);
};

// Who may open a ring stream, besides what the inbox's ring view says.
struct HelloPolicy {
  // Mutual TLS: a hello as worker W must come from a certificate that names W.
  bool require_certificates = false;
  RefusalReporter refusals;  // hears of every refused hello; null: not reported
  // --peer_transport=auto: map the slot ring an accepted hello offers when its sender is on
  // this host (HostIdentity), so that its segments' payload comes through shared memory.
  bool accept_shm = false;
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
