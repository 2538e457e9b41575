#include "daemon/transport/grpc/peer_service.h"

#include <algorithm>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "daemon/transport/grpc/inbound_stream.h"
#include "wire/security/peer_identity.h"

namespace ringsync {

absl::Status InboxRegistry::CheckNotOver(uint64_t generation) const {
  // Retired, or older than the view this worker's own links are in.
  const uint64_t oldest_live = std::max(retired_below_, expected_generation_);
  if (generation >= oldest_live) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "generation ", generation, " is over; this worker is at generation ", oldest_live,
      " or later"));
}

absl::StatusOr<std::shared_ptr<PeerInbox>> InboxRegistry::InboxOf(Inboxes& inboxes,
                                                                  uint64_t generation,
                                                                  int sender_rank, int stride) {
  if (sender_rank < 0) {
    return absl::InvalidArgumentError(absl::StrCat("a ring stream from rank ", sender_rank));
  }
  if (auto it = inboxes.find(sender_rank); it != inboxes.end()) {
    if (it->second->stride() == stride) return it->second;
    return absl::PermissionDeniedError(absl::StrCat(
        "a ring stream from rank ", sender_rank, " for generation ", generation,
        " as the link of stride ", stride, ", where that rank's link has stride ",
        it->second->stride()));
  }
  if (inboxes.size() >= kMaxInboxesPerGeneration) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "a ring stream of generation ", generation, " from rank ", sender_rank,
        " while that generation has streams from ", inboxes.size(), " ranks already (at most ",
        kMaxInboxesPerGeneration, ")"));
  }
  auto inbox = std::make_shared<PeerInbox>(generation, inbox_capacity_, mailbox_spin_, stride);
  inboxes.emplace(sender_rank, inbox);
  return inbox;
}

absl::StatusOr<std::shared_ptr<PeerInbox>> InboxRegistry::Expect(
    uint64_t generation, const ExpectedSender& sender,
    const std::vector<ExpectedSender>& view_senders) {
  absl::StatusOr<std::shared_ptr<PeerInbox>> inbox;
  std::vector<std::shared_ptr<PeerInbox>> superseded;
  std::vector<std::shared_ptr<PeerInbox>> ahead_dropped;
  std::vector<std::pair<std::shared_ptr<PeerInbox>, absl::Status>> not_in_view;
  std::vector<std::pair<std::shared_ptr<PeerInbox>, ExpectedSender>> to_expect;
  {
    absl::MutexLock lock(&mu_);
    if (absl::Status s = CheckNotOver(generation); !s.ok()) return s;
    if (generation != expected_generation_) {  // newer: CheckNotOver refused older ones
      for (auto& [rank, old] : expected_) superseded.push_back(std::move(old));
      expected_.clear();
      view_senders_.clear();
      if (ahead_generation_ == generation) {
        expected_ = std::exchange(ahead_, {});
      } else {  // opened for a generation the view did not go to
        for (auto& [rank, dropped] : ahead_) ahead_dropped.push_back(std::move(dropped));
        ahead_.clear();
      }
      expected_generation_ = generation;
    }
    for (const ExpectedSender& s : view_senders) view_senders_[s.rank] = s;
    view_senders_[sender.rank] = sender;
    // Inboxes opened ahead (or for a sender not expected yet) now answer to the view.
    for (auto it = expected_.begin(); it != expected_.end();) {
      auto named = view_senders_.find(it->first);
      if (named != view_senders_.end() && named->second.stride == it->second->stride()) {
        to_expect.emplace_back(it->second, named->second);
        ++it;
      } else if (!view_senders.empty() || named != view_senders_.end()) {
        not_in_view.emplace_back(
            std::move(it->second),
            absl::PermissionDeniedError(absl::StrCat(
                "a ring stream from rank ", it->first, " for generation ", generation,
                ", whose view does not let that rank send to this worker")));
        it = expected_.erase(it);
      } else {
        ++it;
      }
    }
    inbox = InboxOf(expected_, generation, sender.rank, sender.stride);
  }
  const absl::Status over = absl::AbortedError(
      absl::StrCat("this worker's view is generation ", generation));
  for (const auto& dropped : ahead_dropped) {
    dropped->Close(absl::AbortedError(absl::StrCat(
        "generation ", dropped->generation(), " was opened ahead, but ", over.message())));
  }
  for (const auto& old : superseded) old->Close(over);
  for (const auto& [stranger, why] : not_in_view) {
    if (refusals_) refusals_("peer_hello_not_in_view", why.message());
    stranger->Close(why);
  }
  for (const auto& [opened, named] : to_expect) {
    if (absl::Status s = opened->Expect(named); !s.ok() && refusals_) {
      refusals_("peer_hello_not_in_view", s.message());
    }
  }
  if (!inbox.ok()) return inbox.status();
  return inbox;
}

absl::StatusOr<std::shared_ptr<PeerInbox>> InboxRegistry::ForHello(uint64_t generation,
                                                                   int sender_rank, int stride) {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = CheckNotOver(generation); !s.ok()) return s;
  if (generation == expected_generation_) {
    if (!view_senders_.empty() && !view_senders_.contains(sender_rank)) {
      std::string named;
      for (const auto& [rank, sender] : view_senders_) {
        absl::StrAppend(&named, named.empty() ? "" : ", ", DescribeSender(rank, sender.worker_id));
      }
      return absl::PermissionDeniedError(absl::StrCat(
          "a ring stream from rank ", sender_rank, " for generation ", generation,
          ", whose view lets only ", named, " send to this worker"));
    }
    if (auto named = view_senders_.find(sender_rank);
        named != view_senders_.end() && named->second.stride != stride) {
      return absl::PermissionDeniedError(absl::StrCat(
          "a ring stream from rank ", sender_rank, " for generation ", generation,
          " as the link of stride ", stride, ", where the view has that rank's link to this "
          "worker at stride ", named->second.stride));
    }
    absl::StatusOr<std::shared_ptr<PeerInbox>> inbox =
        InboxOf(expected_, generation, sender_rank, stride);
    if (inbox.ok()) {
      if (auto named = view_senders_.find(sender_rank); named != view_senders_.end()) {
        (*inbox)->Expect(named->second).IgnoreError();  // nothing attached yet to refuse
      }
    }
    return inbox;
  }
  if (!ahead_.empty() && ahead_generation_ != generation) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "a ring stream of generation ", generation, " while one of generation ",
        ahead_generation_, " is already open ahead of this worker's view (generation ",
        expected_generation_, "); one generation ahead at most"));
  }
  ahead_generation_ = generation;
  return InboxOf(ahead_, generation, sender_rank, stride);
}

void InboxRegistry::RetireBefore(uint64_t generation, const absl::Status& why) {
  std::vector<std::shared_ptr<PeerInbox>> retired;
  {
    absl::MutexLock lock(&mu_);
    retired_below_ = std::max(retired_below_, generation);
    for (Inboxes* inboxes : {&expected_, &ahead_}) {
      for (auto it = inboxes->begin(); it != inboxes->end();) {
        if (it->second->generation() < generation) {
          retired.push_back(std::move(it->second));
          it = inboxes->erase(it);
        } else {
          ++it;
        }
      }
    }
  }
  for (const auto& inbox : retired) inbox->Close(why);
}

void InboxRegistry::CloseAll(const absl::Status& why) {
  RetireBefore(std::numeric_limits<uint64_t>::max(), why);
}

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* PeerService::RingStream(
    grpc::CallbackServerContext* context) {
  // gRPC deletes it via OnDone.
  return new InboundStream(registry_, context->peer(), IdentityOf(context->auth_context().get()),
                           policy_);
}

}  // namespace ringsync
