#include "client/src/worker_status.h"

#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace ringsync::internal {

Trailers TrailersOf(const grpc::ClientContext& context) {
  Trailers trailers;
  for (const auto& [key, value] : context.GetServerTrailingMetadata()) {
    trailers.emplace(std::string(key.data(), key.size()), std::string(value.data(), value.size()));
  }
  return trailers;
}

bool ReportedByWorker(const Trailers& trailers) {
  auto it = trailers.find("ringsync-status-origin");
  return it != trailers.end() && it->second == "worker";
}

OutcomeMark OutcomeMarkFromWorker(const Trailers& trailers) {
  auto it = trailers.find(std::string(kOutcomeMetadataKey));
  if (it == trailers.end()) return OutcomeMark::kNone;
  return ParseOutcomeMark(it->second).value_or(OutcomeMark::kNone);
}

std::optional<uint64_t> MembershipFromWorker(const Trailers& trailers) {
  auto it = trailers.find(std::string(kMembershipMetadataKey));
  uint64_t membership = 0;
  if (it == trailers.end() || !absl::SimpleAtoi(it->second, &membership)) return std::nullopt;
  return membership;
}

OutcomeMark OutcomeMarkOfCall(const grpc::Status& status, const Trailers& trailers) {
  if (status.ok()) return OutcomeMark::kNone;
  if (ReportedByWorker(trailers)) return OutcomeMarkFromWorker(trailers);
  switch (status.error_code()) {
    // Refused by gRPC before the worker's handler ran: the collective never reached it.
    case grpc::StatusCode::INVALID_ARGUMENT:
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
    case grpc::StatusCode::UNIMPLEMENTED:
    case grpc::StatusCode::UNAUTHENTICATED:
    case grpc::StatusCode::PERMISSION_DENIED:
      return OutcomeMark::kNone;
    default:
      return OutcomeMark::kInDoubt;
  }
}

absl::Status FromWorkerStatus(const grpc::Status& status, const WorkerTarget& target,
                              bool reported_by_worker) {
  // grpc::StatusCode and absl::StatusCode share their values (both are google.rpc.Code).
  const auto code = static_cast<absl::StatusCode>(status.error_code());
  std::string message = status.error_message();
  switch (code) {
    case absl::StatusCode::kOk:
      return absl::OkStatus();
    case absl::StatusCode::kUnavailable:
      if (reported_by_worker) break;
      absl::StrAppend(&message, " (lost the worker at ", target.grpc_target, ": is ",
                      target.WorkerHint(), "?)");
      break;
    case absl::StatusCode::kDeadlineExceeded:
      absl::StrAppend(&message,
                      " (if the collective is merely large or a rank merely slow, raise its "
                      "timeout in AllReduceOptions/CollectiveOptions; otherwise look at the "
                      "rank named above)");
      break;
    default:
      break;
  }
  return absl::Status(code, message);
}

}  // namespace ringsync::internal
