#include "core/ring/send_queue.h"

namespace ringsync {
namespace {

// The failure is recorded before the receiving thread is woken by the cancellation, so
// that it reports this cause rather than its own "cancelled".
void FailPipeline(RingExchange& exchange, PipelineProgress& progress, const absl::Status& why) {
  progress.Fail(why);
  exchange.Cancel(why);
}

}  // namespace

SendQueue::SendQueue(RingExchange& exchange, PipelineProgress& progress)
    : exchange_(exchange), progress_(progress) {
  if (!exchange_.posts_sends()) sender_ = std::thread([this] { SendInOrder(); });
}

SendQueue::~SendQueue() { Close(absl::Seconds(2)); }

void SendQueue::Post(const SegmentSend& send) {
  const size_t index = progress_.Posted();
  if (sender_.joinable()) {
    absl::MutexLock lock(&mu_);
    queued_.push_back({index, send});
    return;
  }
  if (absl::Status failed = progress_.failure(); !failed.ok()) {
    progress_.Finish(index, failed);
    return;
  }
  RingExchange& exchange = exchange_;
  PipelineProgress& progress = progress_;
  exchange_.PostSegment(send.step, send.segment, send.chunk, send.range, send.payload,
                        [&exchange, &progress, index](absl::Status sent) {
                          if (!sent.ok()) FailPipeline(exchange, progress, sent);
                          progress.Finish(index, sent);  // the last touch: the pipeline may end
                        });
}

void SendQueue::SendInOrder() {
  while (true) {
    Queued next;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return !queued_.empty() || closing_; };
      mu_.Await(absl::Condition(&ready));
      if (queued_.empty()) return;
      next = queued_.front();
      queued_.pop_front();
    }
    absl::Status sent = progress_.failure();
    if (sent.ok()) {
      const SegmentSend& s = next.send;
      sent = exchange_.SendSegment(s.step, s.segment, s.chunk, s.range, s.payload);
      if (!sent.ok()) FailPipeline(exchange_, progress_, sent);
    }
    progress_.Finish(next.index, sent);
  }
}

void SendQueue::Close(absl::Duration grace) {
  if (closed_) return;
  closed_ = true;
  if (sender_.joinable()) {
    // Its sends end by the exchange's limit, and at once after a failure cancelled it.
    {
      absl::MutexLock lock(&mu_);
      closing_ = true;
    }
    sender_.join();
    return;
  }
  if (progress_.AwaitAllFinished(grace)) return;
  exchange_.AbandonPostedSends();
  // The link finishes every abandoned send (Link::AbandonPostedSends).
  while (!progress_.AwaitAllFinished(absl::Seconds(1))) {
  }
}

}  // namespace ringsync
