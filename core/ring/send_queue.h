// SendQueue: the sending side of one ring pipeline. The receiving thread posts each
// segment as soon as its data is in; the queue sends them in that order and reports each
// one's outcome to PipelineProgress (a failed send also cancels the exchange, which wakes
// the receiving thread).
//
// Over a link that posts sends (Link::posts_sends: the gRPC stream) a segment goes
// straight to the link, which writes it from its own threads and reports back: the
// pipeline then has one thread, and a segment that flows through this rank is forwarded
// by the thread that received it, without waking another. Over any other link (the
// in-memory one, the slot ring's, which may wait for their receiver) a thread of the
// queue's own sends the segments one by one, so the receiving thread never waits on a
// slow right neighbour while its left one waits on it.
//
// Thread-safety: Post and Close from the one posting thread; outcomes arrive on others.
#pragma once

#include <deque>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "core/ring/partition.h"
#include "core/ring/pipeline_progress.h"
#include "core/ring/ring_exchange.h"

namespace ringsync {

// One segment to send (RingExchange::SendSegment's arguments).
struct SegmentSend {
  int step = 0;
  int segment = 0;
  int chunk = 0;
  ElementRange range;
  absl::Span<const std::byte> payload;
};

class SendQueue {
 public:
  // REQUIRES: `exchange` and `progress` outlive the queue.
  SendQueue(RingExchange& exchange, PipelineProgress& progress);
  // Closes the queue (Close) if the caller did not.
  ~SendQueue();
  SendQueue(const SendQueue&) = delete;
  SendQueue& operator=(const SendQueue&) = delete;

  // Sends `send` after every segment posted before it; its payload must stay valid and
  // unchanged until its outcome is in. Once the pipeline failed, a posted segment is not
  // sent: it finishes with the failure.
  void Post(const SegmentSend& send);

  // True once every posted segment's outcome is in; false when `wait` passed first.
  bool AwaitFinished(absl::Duration wait) { return progress_.AwaitAllFinished(wait); }

  // Ends the sending. Segments still out (only after a failure: call AwaitFinished on
  // success) get `grace` to go out, then are given up. Returns only once nothing reads
  // a posted payload any more.
  void Close(absl::Duration grace);

 private:
  struct Queued {
    size_t index;
    SegmentSend send;
  };
  // The queue's own thread, over a link that does not post sends.
  void SendInOrder();

  RingExchange& exchange_;
  PipelineProgress& progress_;
  bool closed_ = false;  // posting thread only
  absl::Mutex mu_;
  std::deque<Queued> queued_ ABSL_GUARDED_BY(mu_);  // at most the collective's segments
  bool closing_ ABSL_GUARDED_BY(mu_) = false;
  std::thread sender_;  // joinable only over a link that does not post sends
};

}  // namespace ringsync
