// RingWatchReader: one WatchRing call to the coordinator, read by gRPC's callback threads
// into a bounded queue that the session's watch thread takes views from.
//
// Why not the synchronous ClientReader: a thread blocked in its Read waits inside gRPC's
// poller, and so takes part in polling every connection of the process, ring streams
// included; each event it picks up there it hands on to gRPC's callback threads. During
// large all-reduces over gRPC that one idle thread made ~17% of a worker's futex calls.
// Views are still applied on the session's thread, never on gRPC's: applying one
// connects ring links, which needs gRPC's threads.
//
// Thread-safety: Next and status from one thread; the destructor waits for the call's end.
#pragma once

#include <deque>
#include <optional>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/grpcpp.h"
#include "ringsync/v1/coordinator.grpc.pb.h"

namespace ringsync {

class RingWatchReader final : public grpc::ClientReadReactor<v1::RingView> {
 public:
  // Views read ahead of the session's thread before reading pauses (back-pressure on a
  // coordinator that sends faster than views are applied).
  static constexpr size_t kMaxQueuedViews = 8;

  // Starts the call on `context`, which must outlive this reader; cancelling it ends
  // the call (and Next returns nullopt once the views read before are taken).
  RingWatchReader(v1::Coordinator::Stub& stub, grpc::ClientContext& context,
                  v1::WatchRingRequest request);
  // Cancels the call if it is still open and waits for gRPC to finish with it.
  ~RingWatchReader() override;

  // The next view, waiting for it as long as the call lasts; nullopt once the call
  // ended and every view read was taken.
  std::optional<v1::RingView> Next();
  // Why the call ended. REQUIRES: Next returned nullopt.
  grpc::Status status() const;

  void OnReadDone(bool ok) override;
  void OnDone(const grpc::Status& status) override;

 private:
  // REQUIRES: mu_ held, no read outstanding, the hold still taken.
  void StartReadLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ReleaseHoldLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  grpc::ClientContext& context_;
  const v1::WatchRingRequest request_;  // gRPC reads it when the call starts

  mutable absl::Mutex mu_;
  v1::RingView reading_ ABSL_GUARDED_BY(mu_);  // gRPC's while a read is outstanding
  std::deque<v1::RingView> views_ ABSL_GUARDED_BY(mu_);
  bool read_outstanding_ ABSL_GUARDED_BY(mu_) = false;
  // The call is held open (AddHold) so that Next may restart a paused read from outside
  // the reactions; released once no read will be started again.
  bool holding_ ABSL_GUARDED_BY(mu_) = false;
  bool closing_ ABSL_GUARDED_BY(mu_) = false;  // the destructor runs: no read starts
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  grpc::Status status_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ringsync
