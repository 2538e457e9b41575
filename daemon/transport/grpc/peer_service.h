// The receiving side of the ring's data path: the Peer service accepts the incoming
// RingStreams of other ranks and feeds each stream's frames into the PeerInbox of its
// generation and sender — the left neighbour's (the ring link) and, for the stride
// all-reduces, those of rank-2, rank-4, ... or every other rank (stride links,
// core/link/stride_links.h).
//
// A stream may arrive before this worker has learned the generation it names (the
// sender heard of the new ring view first), so inboxes may be opened ahead — for one
// generation at most, newer than every generation this worker knows; when the worker
// learns its view (Expect), inboxes opened ahead for another generation are dropped, and
// each expected one accepts only the sender the view names for it. Generations older
// than the newest retired one are refused. Whatever peers send, a worker holds inboxes
// of two generations at most, and at most kMaxInboxesPerGeneration of each.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "daemon/transport/grpc/peer_inbox.h"
#include "daemon/transport/tcp/data_listener.h"
#include "ringsync/v1/peer.grpc.pb.h"
#include "wire/security/token_check.h"

namespace ringsync {

// Senders a generation may have inboxes for: a rank receives on its ring link and on one
// stride link per doubling step (log2 N), or on rings of up to kDirectRanksLimit
// (core/ring/allreduce_algorithm.h) one from every other rank for the direct exchange.
inline constexpr size_t kMaxInboxesPerGeneration = 32;

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

  // The inbox of `generation` that this worker's view says `sender` feeds (its left
  // neighbour for the ring link, rank-s for the stride link of s; see
  // PeerInbox::Expect). `view_senders`: every rank the view lets send to this worker
  // (`sender` among them; empty: only `sender` is known): from now on a hello of this
  // generation from anyone else is refused, and so is an inbox opened ahead by one.
  // Learning a newer generation closes the inboxes of the older one and drops those
  // opened ahead for another. FailedPrecondition for a retired generation.
  absl::StatusOr<std::shared_ptr<PeerInbox>> Expect(
      uint64_t generation, const ExpectedSender& sender,
      const std::vector<ExpectedSender>& view_senders = {});

  // The inbox a hello of `generation` from rank `sender_rank` attaches to: the expected
  // one, or one opened ahead (of the current generation for a sender of the view not
  // expected yet, or of the next). FailedPrecondition for a retired generation,
  // PermissionDenied for a sender the view does not name, ResourceExhausted when another
  // generation is already open ahead or the generation has too many senders.
  // `stride`: the link the hello says it is (PeerHello::stride), which must be the one the
  // view has that sender on.
  absl::StatusOr<std::shared_ptr<PeerInbox>> ForHello(uint64_t generation, int sender_rank,
                                                      int stride = 1);

  // Closes and forgets every inbox of a generation below `generation`; refuses them from now on.
  void RetireBefore(uint64_t generation, const absl::Status& why);

  // Closes everything (server shutdown).
  void CloseAll(const absl::Status& why);

 private:
  using Inboxes = std::map<int, std::shared_ptr<PeerInbox>>;  // by sender rank
  // FailedPrecondition when `generation` is retired or older than the expected one.
  absl::Status CheckNotOver(uint64_t generation) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The inbox of `sender_rank` in `inboxes` (of `generation`), for the link of `stride`,
  // made if there is room.
  absl::StatusOr<std::shared_ptr<PeerInbox>> InboxOf(Inboxes& inboxes, uint64_t generation,
                                                     int sender_rank, int stride)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const size_t inbox_capacity_;
  const RefusalReporter refusals_;
  const absl::Duration mailbox_spin_;
  absl::Mutex mu_;
  uint64_t retired_below_ ABSL_GUARDED_BY(mu_) = 0;
  // The generation this worker's own links are in (0: none yet) and their inboxes, and
  // the inboxes opened ahead for one newer generation.
  uint64_t expected_generation_ ABSL_GUARDED_BY(mu_) = 0;
  Inboxes expected_ ABSL_GUARDED_BY(mu_);
  std::map<int, ExpectedSender> view_senders_ ABSL_GUARDED_BY(mu_);  // of expected_generation_
  uint64_t ahead_generation_ ABSL_GUARDED_BY(mu_) = 0;
  Inboxes ahead_ ABSL_GUARDED_BY(mu_);
};

// Who may open a ring stream, besides what the inbox's ring view says.
struct HelloPolicy {
  // Mutual TLS: a hello as worker W must come from a certificate that names W.
  bool require_certificates = false;
  RefusalReporter refusals;  // hears of every refused hello; null: not reported
  // --peer_transport=auto: map the slot ring an accepted hello offers when its sender is on
  // this host (HostIdentity), so that its segments' payload comes through shared memory.
  bool accept_shm = false;
  // Where a sender whose hello offers a data connection is asked to connect (when it is
  // not on the shared-memory path); null: its frames stay on the stream. Shared with the
  // streams that handed out its keys: a stream revokes its key when gRPC ends it, which
  // may be after the server that made the stream was shut down.
  std::shared_ptr<DataListener> data_listener;
  // Mutual TLS: hand each such sender a seal key with its data key, inside the stream's
  // TLS, and open every record of its data connection with it (record_seal.h).
  bool seal_data_connections = false;
  // The largest record a data connection may carry: one frame, as the gRPC server's
  // largest message.
  uint64_t max_data_record_bytes = 0;
};

class PeerService final : public v1::Peer::WithRawCallbackMethod_RingStream<v1::Peer::Service> {
 public:
  explicit PeerService(InboxRegistry& registry, HelloPolicy policy = {})
      : registry_(registry), policy_(std::move(policy)) {}

  grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* RingStream(
      grpc::CallbackServerContext* context) override;

  // Where this service asks for data connections (HelloPolicy::data_listener), or null.
  const DataListener* data_listener() const { return policy_.data_listener.get(); }

 private:
  InboxRegistry& registry_;
  const HelloPolicy policy_;  // read by the streams, which end before this service
};

}  // namespace ringsync
