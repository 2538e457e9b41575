// PeerInbox: the receiving end of one generation's ring edge. The gRPC reactor of the
// incoming peer stream pushes decoded frames in; the ring algorithm pops them out.
//
// Fencing: once the worker knows the generation's view, the inbox accepts a stream only
// from the sender the view names as this rank's left neighbour (rank and worker id), and
// frames only in sequence order (SequenceFence).
//
// Back-pressure: the inbox holds at most `capacity` frames. When it is full the reactor
// stops reading, so HTTP/2 flow control stalls the sender; a Pop that makes room
// resumes reading. Together with the stream window this bounds the bytes in flight.
//
// Same-host frames: a stream whose sender's frame mailbox was accepted
// (AttachMailbox) delivers its frames through it instead of gRPC messages. The thread
// that waits in Pop/Peek takes them out itself, sleeping on the mailbox's doorbell, so a
// frame costs the receiver one wake-up. Frames are validated exactly as gRPC's (the same
// decoder), and fenced alike. The mailbox's bounded size is the back-pressure. A stream
// whose frames come on a data connection (AttachData) is read the same way, by the
// waiting thread, sleeping in poll on the socket; what it leaves unread waits in the
// kernel, and TCP's flow control holds the sender back.
//
// Thread-safety: all methods are safe from any thread (gRPC callback threads included).
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "core/link/link.h"
#include "daemon/shm/slot_ring.h"
#include "daemon/transport/grpc/sequence_fence.h"
#include "daemon/transport/tcp/incoming_records.h"

namespace ringsync {

// What the inbox needs from the stream feeding it. The inbox never calls these while
// holding its own lock, so an implementation may call back into the inbox.
class InboxFeeder {
 public:
  virtual ~InboxFeeder() = default;
  // Read the next message; a no-op while a read is outstanding or the stream ended.
  virtual void ResumeReading() = 0;
  // End the stream with this status; later calls are no-ops.
  virtual void EndStream(const absl::Status& status) = 0;
};

// Who a generation's view names as this worker's left neighbour.
struct ExpectedSender {
  int rank = -1;
  std::string worker_id;
  int stride = 1;  // the link it feeds: 1 the ring link, 2 and up a stride link
};

// "rank 2 (worker w2)": a sender as messages name it. The worker id comes from the
// network, so it is quoted escaped and cut.
std::string DescribeSender(int rank, absl::string_view worker_id);

class PeerInbox {
 public:
  // `mailbox_spin`: how long a receiver waiting on a mailbox looks before it sleeps
  // (FrameMailboxReader::Wait).
  // `stride`: the link this inbox receives for (1: the ring link; 2 and up: a stride
  // link, whose sequence numbers may skip collectives: SequenceFence).
  PeerInbox(uint64_t generation, size_t capacity,
            absl::Duration mailbox_spin = absl::ZeroDuration(), int stride = 1);

  uint64_t generation() const { return generation_; }
  int stride() const { return stride_; }

  // The view is known: from now on only `sender` may feed this inbox. A stream attached
  // before (opened ahead by a neighbour that learned the view first) from anyone else is
  // ended; then PermissionDenied says who it was.
  absl::Status Expect(const ExpectedSender& sender);

  // The stream that feeds this inbox announced itself. A new stream from the same
  // sender replaces its previous one (the sender gave it up and reconnected); a stream
  // from another rank, or from other than the expected sender, is refused
  // (PermissionDenied when the view names someone else).
  absl::Status Attach(std::shared_ptr<InboxFeeder> feeder, int sender_rank,
                      const std::string& sender_worker);
  // The feeding stream `feeder` is gone. Frames already queued are still delivered. A
  // receiver that was waiting when it went fails at once (Unavailable, `why`): frames of
  // its collective may have been lost with the stream, and the stream's end is usually
  // the sender's death (a killed process resets its connections), so waiting out the
  // deadline would only delay the failure. A wait that starts later waits (within its
  // limit) for the sender to reconnect: a sender that lived opens a new stream for its
  // next frame.
  void Detach(const InboxFeeder* feeder, const absl::Status& why);

  // The attached stream `feeder` sends its frames through the frame mailbox of `slots`
  // (its sender's slot ring, mapped here; the slots carry larger payloads): from now on
  // frames come from there, in order, and a frame too large for it, pushed from the
  // stream, is delivered where an empty mailbox record says. A mailbox that holds what no
  // sender writes ends the stream, as a malformed message does. Ignored unless `feeder`
  // is the attached stream and `slots` has a mailbox.
  void AttachMailbox(const InboxFeeder* feeder, std::shared_ptr<SlotRingReader> slots);

  // The attached stream `feeder` sends its frames on the data connection `records`
  // (daemon/transport/tcp/): from now on frames come from there, in order, read by the
  // thread that waits in Pop/Peek itself, as a mailbox's; a connection that holds what no
  // sender writes, or ends, ends the stream. Ignored (and `records` dropped, which closes
  // it) unless `feeder` is the attached stream.
  void AttachData(const InboxFeeder* feeder, std::shared_ptr<IncomingRecords> records);

  // Called by the feeder for each frame, `first_on_stream` for the first after its hello;
  // returns whether there is room for another (if not, the feeder waits for
  // ResumeReading). A frame out of sequence order is refused (PermissionDenied) and not
  // queued; the feeder should end its stream.
  absl::StatusOr<bool> Push(ReceivedFrame frame, bool first_on_stream);

  // The next frame, in arrival order. After Close, frames already queued are still
  // delivered, then the closing status.
  absl::StatusOr<ReceivedFrame> Pop(const WaitLimit& limit);
  // The header of the frame Pop would return next, without taking it.
  absl::StatusOr<Frame> Peek(const WaitLimit& limit);

  // Waits until a stream is attached; returns its sender's rank.
  absl::StatusOr<int> AwaitSender(const WaitLimit& limit);

  // Ends the inbox for good (the generation is over); ends the attached stream.
  void Close(const absl::Status& why);

  // See Link::newest_aborted_sequence. (Not const: it looks into the mailbox.)
  uint64_t newest_aborted_sequence();
  bool attached() const;
  std::string sender_description() const;
  // Frames received and not yet popped (for the segments-in-flight metric).
  size_t queued();

 private:
  absl::StatusOr<ReceivedFrame> PopLocked(const WaitLimit& limit,
                                          std::shared_ptr<InboxFeeder>& resume);
  // Waits until a frame is queued (OK) or the inbox closed with nothing left (its status).
  absl::Status AwaitFrame(const WaitLimit& limit) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Adds why the stream is down, when it is, to a failed wait.
  absl::Status Explain(const absl::Status& waited) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Queues `frame` if the fence admits it; otherwise ends the stream (false).
  bool AdmitLocked(ReceivedFrame frame, bool first_on_stream) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Moves the frames the mailbox holds into queue_, in order, while there is room.
  void DrainMailboxLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The same for the frames the data connection holds.
  void DrainDataLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The attached stream broke for `why` (its mailbox held garbage, a frame out of order):
  // it is detached now, and ended by EndDoomedFeeders once mu_ is released.
  void DoomFeederLocked(const absl::Status& why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void EndDoomedFeeders() ABSL_LOCKS_EXCLUDED(mu_);
  // Wakes a thread sleeping on the mailbox's doorbell (something else it waits for changed).
  void RingLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Forgets the mailbox (its stream was replaced, refused, broken, or the inbox closed),
  // waking whoever sleeps on it.
  void DropMailboxLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Forgets and closes the data connection, waking whoever waits on it.
  void DropDataLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const uint64_t generation_;
  const int stride_;
  const size_t capacity_;
  const absl::Duration mailbox_spin_;
  mutable absl::Mutex mu_;
  std::deque<ReceivedFrame> queue_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<InboxFeeder> feeder_ ABSL_GUARDED_BY(mu_);
  bool ever_attached_ ABSL_GUARDED_BY(mu_) = false;
  bool reading_paused_ ABSL_GUARDED_BY(mu_) = false;
  int sender_rank_ ABSL_GUARDED_BY(mu_) = -1;
  std::string sender_worker_ ABSL_GUARDED_BY(mu_);
  std::optional<ExpectedSender> expected_ ABSL_GUARDED_BY(mu_);
  SequenceFence fence_ ABSL_GUARDED_BY(mu_){stride_ > 1};
  uint64_t newest_aborted_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status closed_ ABSL_GUARDED_BY(mu_);  // non-OK once no more frames will come
  absl::Status stream_end_ ABSL_GUARDED_BY(mu_);  // why the last stream ended, while none is attached
  uint64_t streams_lost_ ABSL_GUARDED_BY(mu_) = 0;  // Detach calls that ended the attached stream
  // The attached stream's frame mailbox (in its slot ring), or null. Kept after that
  // stream ends, until its frames are taken or another stream attaches.
  std::shared_ptr<SlotRingReader> mailbox_ ABSL_GUARDED_BY(mu_);
  uint64_t mailboxes_attached_ ABSL_GUARDED_BY(mu_) = 0;
  bool mailbox_first_frame_ ABSL_GUARDED_BY(mu_) = false;  // no frame taken from it yet
  // Frames pushed from the stream while a mailbox is attached, and how many empty mailbox
  // records (each: "the next frame came on the stream") wait for one of them.
  std::deque<ReceivedFrame> via_stream_ ABSL_GUARDED_BY(mu_);
  uint64_t stream_markers_ ABSL_GUARDED_BY(mu_) = 0;
  // The attached stream's data connection, or null. Kept after that stream ends, until
  // the connection ends or another stream attaches.
  std::shared_ptr<IncomingRecords> data_ ABSL_GUARDED_BY(mu_);
  uint64_t data_attached_ ABSL_GUARDED_BY(mu_) = 0;
  bool data_first_frame_ ABSL_GUARDED_BY(mu_) = false;  // no frame taken from it yet
  std::vector<std::pair<std::shared_ptr<InboxFeeder>, absl::Status>> doomed_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ringsync
