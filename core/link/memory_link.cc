#include "core/link/memory_link.h"

#include <algorithm>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace ringsync {
namespace {

class MemoryLink final : public Link {
 public:
  MemoryLink(MemoryChannel& outbound, MemoryChannel& inbound)
      : outbound_(outbound), inbound_(inbound) {}

  absl::Status Send(const Frame& frame, absl::Span<const std::byte> payload,
                    const WaitLimit& limit) override {
    return outbound_.Push(frame, payload, limit);
  }
  absl::StatusOr<ReceivedFrame> Receive(const WaitLimit& limit) override {
    return inbound_.Pop(limit);
  }
  absl::StatusOr<Frame> Peek(const WaitLimit& limit) override { return inbound_.Peek(limit); }
  uint64_t newest_aborted_sequence() const override { return inbound_.newest_aborted_sequence(); }
  size_t queued_frames() const override { return inbound_.queued(); }

 private:
  MemoryChannel& outbound_;
  MemoryChannel& inbound_;
};

}  // namespace

MemoryChannel::MemoryChannel(size_t capacity) : capacity_(capacity) {}

absl::Status MemoryChannel::Push(const Frame& frame, absl::Span<const std::byte> payload,
                                 const WaitLimit& limit) {
  // Copy before taking the lock: the payload copy is the "wire".
  auto bytes = std::make_shared<std::vector<std::byte>>(payload.begin(), payload.end());
  const size_t limit_frames = capacity_ + (frame.kind == FrameKind::kAbort ? 1 : 0);
  absl::MutexLock lock(&mu_);
  auto has_room = [&]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return queue_.size() < limit_frames; };
  if (absl::Status s = AwaitWithLimit(mu_, absl::Condition(&has_room), limit,
                                      "send to the next rank");
      !s.ok()) {
    return s;
  }
  queue_.push_back({frame, std::move(bytes)});
  if (frame.kind == FrameKind::kAbort && frame.sequence > newest_aborted_.load()) {
    newest_aborted_.store(frame.sequence);
  }
  high_water_mark_ = std::max(high_water_mark_, queue_.size());
  payload_bytes_ += payload.size();
  ++frames_;
  return absl::OkStatus();
}

absl::Status MemoryChannel::AwaitFrame(const WaitLimit& limit) {
  auto has_frame = [&]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return !queue_.empty(); };
  return AwaitWithLimit(mu_, absl::Condition(&has_frame), limit, "receive from the previous rank");
}

absl::StatusOr<ReceivedFrame> MemoryChannel::Pop(const WaitLimit& limit) {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = AwaitFrame(limit); !s.ok()) return s;
  Entry entry = std::move(queue_.front());
  queue_.pop_front();
  ReceivedFrame received;
  received.frame = std::move(entry.frame);
  received.payload = absl::MakeConstSpan(*entry.payload);
  received.storage = std::move(entry.payload);
  return received;
}

absl::StatusOr<Frame> MemoryChannel::Peek(const WaitLimit& limit) {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = AwaitFrame(limit); !s.ok()) return s;
  return queue_.front().frame;
}

size_t MemoryChannel::high_water_mark() const {
  absl::MutexLock lock(&mu_);
  return high_water_mark_;
}

size_t MemoryChannel::queued() const {
  absl::MutexLock lock(&mu_);
  return queue_.size();
}

MemoryRing::MemoryRing(int world_size, size_t capacity_frames, int stride) : stride_(stride) {
  for (int r = 0; r < world_size; ++r) {
    channels_.push_back(std::make_unique<MemoryChannel>(capacity_frames));
  }
  for (int r = 0; r < world_size; ++r) {
    links_.push_back(
        std::make_unique<MemoryLink>(*channels_[(r + stride) % world_size], *channels_[r]));
  }
}

uint64_t MemoryRing::bytes_sent(int rank) const {
  return channels_[(rank + stride_) % world_size()]->payload_bytes_pushed();
}

uint64_t MemoryRing::frames_sent(int rank) const {
  return channels_[(rank + stride_) % world_size()]->frames_pushed();
}

class MemoryStrideMesh::RankLinks final : public StrideLinks {
 public:
  RankLinks(MemoryStrideMesh& mesh, int rank) : mesh_(mesh), rank_(rank) {}

  absl::StatusOr<Link*> Stride(int stride, const WaitLimit& /*limit*/) override {
    if (stride < 1 || stride >= mesh_.world_size()) {
      return absl::InvalidArgumentError(absl::StrCat("no link of stride ", stride, " among ",
                                                     mesh_.world_size(), " ranks"));
    }
    Link* link = &mesh_.ring(stride).link(rank_);
    if (std::find(connected_.begin(), connected_.end(), link) == connected_.end()) {
      connected_.push_back(link);
    }
    return link;
  }

  std::vector<Link*> Connected() override {
    std::vector<Link*> links{&mesh_.ring(1).link(rank_)};
    for (Link* link : connected_) {
      if (link != links.front()) links.push_back(link);
    }
    return links;
  }

 private:
  MemoryStrideMesh& mesh_;
  const int rank_;
  std::vector<Link*> connected_;
};

MemoryStrideMesh::MemoryStrideMesh(int world_size, size_t capacity_frames)
    : world_size_(world_size) {
  for (int s = 1; s < std::max(world_size, 2); ++s) {
    rings_.push_back(std::make_unique<MemoryRing>(world_size, capacity_frames, s));
  }
  for (int r = 0; r < world_size; ++r) ranks_.push_back(std::make_unique<RankLinks>(*this, r));
}

MemoryStrideMesh::~MemoryStrideMesh() = default;

StrideLinks& MemoryStrideMesh::links(int rank) { return *ranks_[static_cast<size_t>(rank)]; }

}  // namespace ringsync
