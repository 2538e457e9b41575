// FaultyLink: a Link that wraps another and does to the frames it sends what a test
// scripts — drop, delay, corrupt, stall, or close — so the ring's failure handling can be
// specified frame by frame, over the in-memory link or any other.
//
// A script maps the index of a Send on this link (0, 1, 2, ... counted from construction)
// to a fault. Receive, Peek and newest_aborted_sequence pass through unchanged.
//
// Thread-safety: as Link (one sender thread, one receiver thread); Script may be called
// from any thread.
#pragma once

#include <cstdint>
#include <map>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/link/link.h"

namespace ringsync {

struct LinkFault {
  enum class Kind {
    kDrop,     // Send returns OK; the frame never arrives
    kDelay,    // the frame arrives after `delay`
    kCorrupt,  // the frame arrives with its step advanced by one (a frame out of place)
    kStall,    // Send blocks until its limit ends (DeadlineExceeded or Cancelled)
    kClose,    // this and every later Send fails with Unavailable
  };
  Kind kind = Kind::kDrop;
  absl::Duration delay = absl::ZeroDuration();  // kDelay only

  static LinkFault Drop() { return {Kind::kDrop}; }
  static LinkFault Delay(absl::Duration d) { return {Kind::kDelay, d}; }
  static LinkFault Corrupt() { return {Kind::kCorrupt}; }
  static LinkFault Stall() { return {Kind::kStall}; }
  static LinkFault Close() { return {Kind::kClose}; }
};

class FaultyLink final : public Link {
 public:
  // REQUIRES: `inner` outlives this link.
  explicit FaultyLink(Link& inner) : inner_(inner) {}

  // The `send_index`-th Send (0-based) suffers `fault`. Abort frames count like any other.
  void Script(uint64_t send_index, LinkFault fault);

  absl::Status Send(const Frame& frame, absl::Span<const std::byte> payload,
                    const WaitLimit& limit) override;
  absl::StatusOr<ReceivedFrame> Receive(const WaitLimit& limit) override {
    return inner_.Receive(limit);
  }
  absl::StatusOr<Frame> Peek(const WaitLimit& limit) override { return inner_.Peek(limit); }
  uint64_t newest_aborted_sequence() const override { return inner_.newest_aborted_sequence(); }
  size_t queued_frames() const override { return inner_.queued_frames(); }
  size_t min_useful_segment_bytes() const override { return inner_.min_useful_segment_bytes(); }

  // Sends attempted so far, faulty or not.
  uint64_t sends() const;

 private:
  Link& inner_;
  mutable absl::Mutex mu_;
  std::map<uint64_t, LinkFault> script_ ABSL_GUARDED_BY(mu_);
  uint64_t sends_ ABSL_GUARDED_BY(mu_) = 0;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace ringsync
