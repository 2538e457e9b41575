// ClientCallChannel: the worker's end of its attached client's call channel
// (worker.proto, OpenCallChannel). The client's collectives arrive as CallRequest records
// in a frame mailbox inside one of its registered buffers; a thread of this channel
// sleeps on that mailbox's doorbell, hands each request to the same intake as the RPC
// (`submit`, which may run the collective on this thread when the worker is idle:
// CollectiveExecutor::SubmitAndRunIfIdle), and the answer goes back as a CallAnswer
// record in the second mailbox.
//
// Why: a collective RPC over the unix socket cost the worker and the client together
// about 14 thread switches (gRPC's pollers handing the call around); through the channel
// it costs two futex wake-ups, one each way.
//
// The records come from the attached client's own memory, so they are read as untrusted
// bytes (FrameMailboxReader checks the area; each record is a bounded protobuf). Answers
// never make the executor wait for the client: one that does not fit now is kept (as many
// as the calls in flight, which the executor's queue bounds) and written by the channel's
// thread when the client has taken the ones before.
//
// Thread-safety: answers may be posted from any thread, at any time, also after the
// channel closed (they are dropped).
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "core/collective.h"
#include "daemon/shm/frame_mailbox.h"
#include "daemon/shm/sealed_mapping.h"
#include "ringsync/v1/worker.pb.h"
#include "wire/call_channel_layout.h"

namespace ringsync {

class ClientCallChannel {
 public:
  // Answers a call: called once per request, from any thread.
  using Answer = std::function<void(v1::CallAnswer)>;
  // Runs a request as its RPC would run; calls `answer` once it has one.
  using Submit =
      std::function<void(CollectiveKind, const v1::CollectiveRequest&, const Answer& answer)>;

  // `buffer` (held mapped by `mapping`) is CallChannelLayout::BufferBytes(capacity) long.
  // `on_broken` runs once, on the channel's thread, if the client's records are not what
  // any client writes; the channel then stops reading.
  // `spin`: how long the channel's thread looks for the next request before it sleeps
  // (FrameMailboxReader::Wait).
  ClientCallChannel(std::shared_ptr<SealedMapping> mapping, absl::Span<std::byte> buffer,
                    uint64_t capacity, Submit submit,
                    std::function<void(const absl::Status&)> on_broken,
                    absl::Duration spin = absl::ZeroDuration());
  // Stops the thread; answers posted afterwards are dropped.
  ~ClientCallChannel();
  ClientCallChannel(const ClientCallChannel&) = delete;
  ClientCallChannel& operator=(const ClientCallChannel&) = delete;

 private:
  // The answer side, shared with the answers still to come.
  class Answers;

  void Loop(std::stop_token stop);
  // False when `record` broke the channel (on_broken_ has been told).
  bool Handle(const std::vector<std::byte>& record);

  const std::shared_ptr<SealedMapping> mapping_;
  FrameMailboxReader requests_;
  const std::shared_ptr<Answers> answers_;
  const Submit submit_;
  const std::function<void(const absl::Status&)> on_broken_;
  const absl::Duration spin_;
  std::jthread thread_;
};

}  // namespace ringsync
