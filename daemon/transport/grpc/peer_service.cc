#include "daemon/transport/grpc/peer_service.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "daemon/transport/grpc/inbound_stream.h"
#include "wire/security/peer_identity.h"

namespace ringsync {

absl::Status InboxRegistry::CheckNotOver(uint64_t generation) const {
  // Retired, or older than the view this worker's own link is in.
  const uint64_t oldest_live =
      std::max(retired_below_, expected_ != nullptr ? expected_generation_ : uint64_t{0});
  if (generation >= oldest_live) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "generation ", generation, " is over; this worker is at generation ", oldest_live,
      " or later"));
}

absl::StatusOr<std::shared_ptr<PeerInbox>> InboxRegistry::Expect(uint64_t generation,
                                                                 const ExpectedSender& sender) {
  std::shared_ptr<PeerInbox> inbox;
  std::shared_ptr<PeerInbox> ahead_dropped;
  std::shared_ptr<PeerInbox> superseded;
  {
    absl::MutexLock lock(&mu_);
    if (absl::Status s = CheckNotOver(generation); !s.ok()) return s;
    if (expected_ != nullptr && expected_generation_ == generation) {
      inbox = expected_;
    } else if (ahead_ != nullptr && ahead_->generation() == generation) {
      inbox = std::exchange(ahead_, nullptr);
    } else {
      inbox = std::make_shared<PeerInbox>(generation, inbox_capacity_, mailbox_spin_);
    }
    ahead_dropped = std::exchange(ahead_, nullptr);
    if (expected_ != inbox) superseded = std::exchange(expected_, inbox);
    expected_generation_ = generation;
  }
  const absl::Status over = absl::AbortedError(
      absl::StrCat("this worker's view is generation ", generation));
  if (ahead_dropped != nullptr) {
    ahead_dropped->Close(absl::AbortedError(absl::StrCat(
        "generation ", ahead_dropped->generation(), " was opened ahead, but ", over.message())));
  }
  if (superseded != nullptr) superseded->Close(over);
  if (absl::Status s = inbox->Expect(sender); !s.ok() && refusals_) {
    refusals_("peer_hello_not_in_view", s.message());
  }
  return inbox;
}

absl::StatusOr<std::shared_ptr<PeerInbox>> InboxRegistry::ForHello(uint64_t generation) {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = CheckNotOver(generation); !s.ok()) return s;
  if (expected_ != nullptr && generation == expected_generation_) return expected_;
  if (ahead_ == nullptr) {
    ahead_ = std::make_shared<PeerInbox>(generation, inbox_capacity_, mailbox_spin_);
  } else if (ahead_->generation() != generation) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "a ring stream of generation ", generation, " while one of generation ",
        ahead_->generation(), " is already open ahead of this worker's view (generation ",
        expected_generation_, "); one generation ahead at most"));
  }
  return ahead_;
}

void InboxRegistry::RetireBefore(uint64_t generation, const absl::Status& why) {
  std::vector<std::shared_ptr<PeerInbox>> retired;
  {
    absl::MutexLock lock(&mu_);
    retired_below_ = std::max(retired_below_, generation);
    if (expected_ != nullptr && expected_generation_ < generation) {
      retired.push_back(std::exchange(expected_, nullptr));
    }
    if (ahead_ != nullptr && ahead_->generation() < generation) {
      retired.push_back(std::exchange(ahead_, nullptr));
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
