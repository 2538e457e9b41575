// CallChannel: the SDK's end of its worker's call channel (worker.proto, OpenCallChannel)
// — collectives sent as records through shared memory instead of one RPC each. The
// requests and the worker's answers are two frame mailboxes (daemon/shm/frame_mailbox.h)
// in one registered buffer; a reader thread sleeps on the answers' doorbell and hands each
// answer to `on_answer`.
//
// Why: over the unix socket a collective's RPC cost the client and the worker about 14
// thread switches together (gRPC's pollers hand the call around); through the channel,
// one futex wake-up each way. What a call carries and how its answer is read is exactly
// the RPC's (CallRequest wraps the CollectiveRequest; CallAnswer carries the status and
// trailers the RPC would end with).
//
// Thread-safety: Send from any thread; on_answer runs on the reader thread.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "client/src/registered_memory.h"
#include "core/collective.h"
#include "core/sync/wait_limit.h"
#include "daemon/shm/frame_mailbox.h"
#include "ringsync/v1/worker.pb.h"

namespace ringsync::internal {

class CallChannel {
 public:
  using OnAnswer = std::function<void(const v1::CallAnswer&)>;
  // Answers that are not what any worker writes: the channel stops reading.
  using OnBroken = std::function<void(const absl::Status&)>;

  // `memory` is registered with the worker and CallChannelLayout::BufferBytes(capacity)
  // long, still zero; the worker is told of it (OpenCallChannel) by the caller.
  // `spin`: how long the reader looks for the next answer before it sleeps
  // (FrameMailboxReader::Wait).
  CallChannel(std::shared_ptr<RegisteredMemory> memory, uint64_t capacity, OnAnswer on_answer,
              OnBroken on_broken, absl::Duration spin = absl::ZeroDuration());
  // Stops the reader; answers that arrive afterwards are not read.
  ~CallChannel();
  CallChannel(const CallChannel&) = delete;
  CallChannel& operator=(const CallChannel&) = delete;

  // Whether a request of `request_bytes` (serialized CollectiveRequest) whose answer may
  // carry `answer_bytes` of inline data fits the channel; calls that do not take the RPC.
  bool Fits(size_t request_bytes, size_t answer_bytes) const;

  // Puts the call's record; the worker takes it at once unless it is stuck. Not sent on
  // error (DeadlineExceeded, InvalidArgument): the caller may use the RPC instead.
  absl::Status Send(uint64_t call_id, CollectiveKind kind, const v1::CollectiveRequest& request,
                    const WaitLimit& limit);

 private:
  void Read(std::stop_token stop);

  const std::shared_ptr<RegisteredMemory> memory_;
  const uint64_t max_record_bytes_;
  absl::Mutex send_mu_;
  FrameMailboxWriter requests_ ABSL_GUARDED_BY(send_mu_);
  std::string request_bytes_ ABSL_GUARDED_BY(send_mu_);  // Send's, kept for its capacity
  FrameMailboxReader answers_;  // the reader thread's
  const OnAnswer on_answer_;
  const OnBroken on_broken_;
  const absl::Duration spin_;
  std::jthread reader_;
};

}  // namespace ringsync::internal
