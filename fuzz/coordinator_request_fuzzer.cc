// Fuzzes what the coordinator does with the requests workers send it: the field checks
// of request_validation.h and the Membership state machine they guard, fed a sequence of
// Join, Heartbeat, Leave and watch requests as CoordinatorService would.
//
// Input: records of [op: 1 byte][clock advance in 100 ms: 1 byte][length: 2 bytes, little
// endian][a serialized request of that length]. Session tokens are random per join, so a
// request's session_token below kSessionSlots stands for the token of the join with that
// index (the harness remembers them); any other value is used as sent.
// Properties: no string from a request reaches a stored field, a view or a log message
// with a control character in it; accepted ids and addresses pass their checks; a
// formed view has min..max members ranked in order, and generations only grow (an
// adopted view is the one exception: it keeps the generation its workers reported, which
// is above everything this coordinator published, since it publishes nothing before).
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "daemon/coordinator/coordinator_service.h"
#include "daemon/coordinator/membership.h"
#include "daemon/coordinator/request_validation.h"
#include "daemon/coordinator/ring_settings.h"
#include "daemon/logging/sanitized_text.h"
#include "fuzz/fuzz_check.h"
#include "ringsync/v1/coordinator.pb.h"

namespace ringsync {
namespace {

constexpr size_t kSessionSlots = 8;
constexpr int kMinWorldSize = 2;
constexpr int kMaxWorldSize = 3;

enum class Op : uint8_t { kJoin, kHeartbeat, kLeave, kWatch, kWatchClosed, kExpire, kCount };

bool OneLine(absl::string_view text) {
  for (char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte == 0x7F) return false;
  }
  return true;
}

// The checks every logged string passes through (CoordinatorService logs ids this way).
void CheckSanitized(absl::string_view text, size_t max_bytes) {
  const std::string shown = SanitizeText(text, max_bytes);
  FUZZ_CHECK(OneLine(shown));
  FUZZ_CHECK(shown.size() <= max_bytes + 3);  // "..." when cut
  if (text.size() <= max_bytes) FUZZ_CHECK(shown.size() == text.size());
}

class Harness {
 public:
  Harness()
      : membership_({kMinWorldSize, kMaxWorldSize, absl::Seconds(5), absl::Seconds(1),
                     absl::Milliseconds(500)}) {}

  void Run(Op op, absl::string_view message) {
    switch (op) {
      case Op::kJoin: return Join(message);
      case Op::kHeartbeat: return Heartbeat(message);
      case Op::kLeave: return Leave(message);
      case Op::kWatch: return Watch(message, /*closed=*/false);
      case Op::kWatchClosed: return Watch(message, /*closed=*/true);
      case Op::kExpire: membership_.Expire(now_); return;
      case Op::kCount: return;
    }
  }

  void Advance(absl::Duration by) { now_ += by; }

  // What must hold after every request.
  void CheckState() {
    const View& view = membership_.view();
    FUZZ_CHECK(view.generation >= last_generation_);
    last_generation_ = view.generation;
    FUZZ_CHECK(membership_.live_workers() <= kMaxWorldSize);
    if (view.formed()) {
      FUZZ_CHECK(static_cast<int>(view.members.size()) >= kMinWorldSize);
      FUZZ_CHECK(static_cast<int>(view.members.size()) <= kMaxWorldSize);
      for (size_t rank = 0; rank < view.members.size(); ++rank) {
        FUZZ_CHECK(view.members[rank].rank == static_cast<int>(rank));
        FUZZ_CHECK(ValidateWorkerId(view.members[rank].worker_id).ok());
      }
    }
    FUZZ_CHECK(OneLine(view.dissolved_reason));
    for (const WorkerSnapshot& worker : membership_.Workers(now_)) {
      FUZZ_CHECK(ValidateWorkerId(worker.worker_id).ok());
      FUZZ_CHECK(ValidateHostPort("peer_address", worker.peer_address, true).ok());
      FUZZ_CHECK(OneLine(worker.last_error) && worker.last_error.size() <= kMaxTextBytes + 3);
    }
    for (const MembershipEvent& event : membership_.TakeEvents()) {
      FUZZ_CHECK(OneLine(event.message));
      FUZZ_CHECK(OneLine(event.view.dissolved_reason));
      FUZZ_CHECK(OneLine(event.view.change_reason));
    }
  }

 private:
  uint64_t Token(uint64_t sent) const {
    return sent < kSessionSlots && sent < tokens_.size() ? tokens_[sent] : sent;
  }

  void Join(absl::string_view message) {
    v1::JoinRequest request;
    if (!request.ParseFromArray(message.data(), static_cast<int>(message.size()))) return;
    CheckSanitized(request.worker_id(), kMaxWorkerIdBytes);
    const JoinInfo info = FromProto(request, /*observed_host=*/"");
    absl::StatusOr<uint64_t> token = membership_.Join(info, now_);
    if (!token.ok()) {
      FUZZ_CHECK(OneLine(token.status().message()));
      return;
    }
    FUZZ_CHECK(*token != 0);
    FUZZ_CHECK(ValidateWorkerId(info.worker_id).ok());
    FUZZ_CHECK(ValidateHostPort("peer_address", info.peer_address, true).ok());
    FUZZ_CHECK(ValidateRingSettings(info.worker_id, info.ring_settings).ok());
    if (tokens_.size() < kSessionSlots) tokens_.push_back(*token);
  }

  void Heartbeat(absl::string_view message) {
    v1::HeartbeatRequest request;
    if (!request.ParseFromArray(message.data(), static_cast<int>(message.size()))) return;
    CheckSanitized(request.last_error(), kMaxTextBytes);
    HeartbeatReport report;
    report.worker_id = request.worker_id();
    report.session_token = Token(request.session_token());
    report.generation = request.generation();
    report.ready = request.ready();
    report.collectives_completed = request.collectives_completed();
    report.collectives_failed = request.collectives_failed();
    report.last_error = request.last_error();
    absl::StatusOr<uint64_t> generation = membership_.Heartbeat(report, now_);
    if (generation.ok()) {
      FUZZ_CHECK(*generation == membership_.view().generation);
    } else {
      FUZZ_CHECK(OneLine(generation.status().message()));
    }
  }

  void Leave(absl::string_view message) {
    v1::LeaveRequest request;
    if (!request.ParseFromArray(message.data(), static_cast<int>(message.size()))) return;
    const absl::Status status = membership_.Leave(
        request.worker_id(), Token(request.session_token()), request.reason(), now_);
    FUZZ_CHECK(OneLine(status.message()));
  }

  void Watch(absl::string_view message, bool closed) {
    v1::WatchRingRequest request;
    if (!request.ParseFromArray(message.data(), static_cast<int>(message.size()))) return;
    const uint64_t token = Token(request.session_token());
    if (closed) {
      membership_.WatchClosed(request.worker_id(), token, now_);
      return;
    }
    FUZZ_CHECK(OneLine(membership_.CheckSession(request.worker_id(), token, now_).message()));
  }

  Membership membership_;
  absl::Time now_ = absl::UnixEpoch() + absl::Hours(1);
  uint64_t last_generation_ = 0;
  std::vector<uint64_t> tokens_;
};

}  // namespace
}  // namespace ringsync

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ringsync;
  Harness harness;
  size_t at = 0;
  while (size - at >= 4) {
    const auto op = static_cast<Op>(data[at] % static_cast<uint8_t>(Op::kCount));
    const absl::Duration advance = absl::Milliseconds(100) * data[at + 1];
    const size_t length = std::min<size_t>(data[at + 2] | (data[at + 3] << 8), size - at - 4);
    const absl::string_view message(reinterpret_cast<const char*>(data + at + 4), length);
    at += 4 + length;
    harness.Advance(advance);
    harness.Run(op, message);
    harness.CheckState();
  }
  return 0;
}
