#include "daemon/transport/grpc/peer_service.h"

#include "absl/strings/str_cat.h"
#include "daemon/transport/grpc/inbound_stream.h"
#include "wire/security/peer_identity.h"

namespace ringsync {

absl::StatusOr<std::shared_ptr<PeerInbox>> InboxRegistry::Get(uint64_t generation) {
  absl::MutexLock lock(&mu_);
  if (generation < retired_below_) {
    return absl::FailedPreconditionError(absl::StrCat(
        "generation ", generation, " is over; this worker is at generation ", retired_below_,
        " or later"));
  }
  std::shared_ptr<PeerInbox>& inbox = inboxes_[generation];
  if (inbox == nullptr) inbox = std::make_shared<PeerInbox>(generation, inbox_capacity_);
  return inbox;
}

void InboxRegistry::RetireBefore(uint64_t generation, const absl::Status& why) {
  std::vector<std::shared_ptr<PeerInbox>> retired;
  {
    absl::MutexLock lock(&mu_);
    retired_below_ = std::max(retired_below_, generation);
    for (auto it = inboxes_.begin(); it != inboxes_.end() && it->first < generation;) {
      retired.push_back(std::move(it->second));
      it = inboxes_.erase(it);
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
