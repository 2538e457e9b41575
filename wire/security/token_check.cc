#include "wire/security/token_check.h"

#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "grpc/grpc.h"
#include "grpc/grpc_security.h"
#include "wire/reaction_order.h"
#include "wire/security/cluster_token.h"

namespace ringsync {
namespace {

absl::string_view View(const grpc::string_ref& ref) { return {ref.data(), ref.size()}; }
absl::string_view View(const grpc_slice& slice) {
  return {reinterpret_cast<const char*>(GRPC_SLICE_START_PTR(slice)), GRPC_SLICE_LENGTH(slice)};
}

class Processor final : public grpc::AuthMetadataProcessor {
 public:
  explicit Processor(std::shared_ptr<const TokenCheck> check) : check_(std::move(check)) {}

  // The check is a comparison in memory: run it on gRPC's thread, not a pool's.
  bool IsBlocking() const override { return false; }

  grpc::Status Process(const InputMetadata& metadata, grpc::AuthContext* context,
                       OutputMetadata* consumed, OutputMetadata* /*response*/) override {
    std::optional<absl::string_view> authorization;
    std::string caller = "a call";
    for (const auto& [key, value] : metadata) {
      if (View(key) == kAuthorizationKey) authorization = View(value);
      if (View(key) == ":path") caller = absl::StrCat("a call to ", View(value));
    }
    if (context != nullptr) {
      for (const grpc::string_ref& uri : context->FindPropertyValues("peer_uri")) {
        absl::StrAppend(&caller, " from ", View(uri));
      }
    }
    const absl::Status status =
        check_->Check(authorization.has_value() ? &*authorization : nullptr, caller);
    if (!status.ok()) {
      return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, std::string(status.message()));
    }
    if (authorization.has_value()) consumed->insert({kAuthorizationKey, std::string(*authorization)});
    return grpc::Status::OK;
  }

 private:
  const std::shared_ptr<const TokenCheck> check_;
};

class PlaintextTokenCredentials final : public grpc::ServerCredentials {
 public:
  explicit PlaintextTokenCredentials(std::shared_ptr<const TokenCheck> check)
      : check_(std::move(check)) {}

  void SetAuthMetadataProcessor(const std::shared_ptr<grpc::AuthMetadataProcessor>&) override {}

 private:
  // gRPC's core calls this synchronously for each call's initial metadata.
  static void Process(void* state, grpc_auth_context* /*context*/, const grpc_metadata* metadata,
                      size_t count, grpc_process_auth_metadata_done_cb done, void* user_data) {
    InReaction(state);  // gRPC's core hands `state` over from the thread that added the port
    const TokenCheck* check = static_cast<std::shared_ptr<const TokenCheck>*>(state)->get();
    std::optional<absl::string_view> authorization;
    std::string caller = "a call";
    for (size_t i = 0; i < count; ++i) {
      if (View(metadata[i].key) == kAuthorizationKey) authorization = View(metadata[i].value);
      if (View(metadata[i].key) == ":path") caller = absl::StrCat("a call to ", View(metadata[i].value));
    }
    const absl::Status status =
        check->Check(authorization.has_value() ? &*authorization : nullptr, caller);
    if (status.ok()) {
      done(user_data, nullptr, 0, nullptr, 0, GRPC_STATUS_OK, nullptr);
      return;
    }
    const std::string message(status.message());
    done(user_data, nullptr, 0, nullptr, 0, GRPC_STATUS_UNAUTHENTICATED, message.c_str());
  }

  int AddPortToServer(const std::string& address, grpc_server* server) override {
    grpc_server_credentials* credentials = grpc_insecure_server_credentials_create();
    // The core credentials outlive this object (the server keeps them after the
    // ServerBuilder is gone), so they own a reference to the check, dropped by Destroy.
    auto state = std::make_unique<std::shared_ptr<const TokenCheck>>(check_);
    HandToGrpc(state.get());
    grpc_server_credentials_set_auth_metadata_processor(
        credentials, grpc_auth_metadata_processor{&Process, &Destroy, state.release()});
    const int port = grpc_server_add_http2_port(server, address.c_str(), credentials);
    grpc_server_credentials_release(credentials);
    return port;
  }

  static void Destroy(void* state) {
    std::unique_ptr<std::shared_ptr<const TokenCheck>>(
        static_cast<std::shared_ptr<const TokenCheck>*>(state));
  }

  const std::shared_ptr<const TokenCheck> check_;
};

}  // namespace

TokenCheck::TokenCheck(std::string token, RefusalReporter refusals)
    : token_(std::move(token)), refusals_(std::move(refusals)) {}

absl::Status TokenCheck::Check(const absl::string_view* authorization,
                               absl::string_view caller) const {
  if (authorization != nullptr && BearerMatches(*authorization, token_)) return absl::OkStatus();
  const bool missing = authorization == nullptr;
  if (refusals_) {
    refusals_(missing ? "no_cluster_token" : "wrong_cluster_token",
              absl::StrCat(caller, missing ? " without the cluster token"
                                           : " with a wrong cluster token"));
  }
  return absl::UnauthenticatedError(
      missing ? "this server requires the cluster token and the call carried none; start the "
                "caller with the cluster's --token_file"
              : "the call's cluster token is wrong; give the caller the same --token_file as "
                "the server");
}

std::shared_ptr<grpc::AuthMetadataProcessor> TokenProcessor(std::shared_ptr<const TokenCheck> check) {
  return std::make_shared<Processor>(std::move(check));
}

std::shared_ptr<grpc::ServerCredentials> PlaintextWithToken(std::shared_ptr<const TokenCheck> check) {
  return std::make_shared<PlaintextTokenCredentials>(std::move(check));
}

}  // namespace ringsync
