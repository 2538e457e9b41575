#include "tools/ringsyncctl/health_check.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "daemon/logging/json_string.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"

namespace ringsync {

HealthResult CheckHealth(const std::string& target, const std::string& service,
                         const TransportSecurity& security, absl::Duration timeout) {
  auto channel = security.CreateChannel(target, grpc::ChannelArguments());
  auto stub = grpc::health::v1::Health::NewStub(channel);
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  grpc::health::v1::HealthCheckRequest request;
  request.set_service(service);
  grpc::health::v1::HealthCheckResponse response;
  const grpc::Status status = stub->Check(&context, request, &response);
  HealthResult result;
  if (!status.ok()) {
    // grpc::StatusCode and absl::StatusCode share their values (google.rpc.Code).
    result.status = absl::StatusCodeToString(static_cast<absl::StatusCode>(status.error_code()));
    switch (status.error_code()) {
      case grpc::StatusCode::NOT_FOUND:
        result.detail = absl::StrCat(target, " does not know the service '", service, "'");
        break;
      case grpc::StatusCode::UNIMPLEMENTED:
        result.detail = absl::StrCat(target, " serves no grpc.health.v1.Health service");
        break;
      default:
        result.detail = absl::StrCat("cannot reach ", target, " within ",
                                     absl::FormatDuration(timeout), ": ", status.error_message());
    }
    return result;
  }
  result.status = grpc::health::v1::HealthCheckResponse::ServingStatus_Name(response.status());
  result.serving = response.status() == grpc::health::v1::HealthCheckResponse::SERVING;
  if (!result.serving) {
    result.detail = absl::StrCat(target, " answers ", result.status,
                                 service.empty() ? "" : absl::StrCat(" for '", service, "'"));
  }
  return result;
}

std::string HealthJson(const std::string& target, const std::string& service,
                       const HealthResult& result) {
  return absl::StrCat("{\"target\":", JsonString(target), ",\"service\":", JsonString(service),
                      ",\"serving\":", result.serving ? "true" : "false",
                      ",\"status\":", JsonString(result.status),
                      ",\"detail\":", JsonString(result.detail), "}\n");
}

}  // namespace ringsync
