#include "wire/security/transport_security.h"

#include <fstream>
#include <sstream>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/security/tls_credentials_options.h"
#include "grpcpp/support/client_interceptor.h"
#include "wire/security/cluster_token.h"

namespace ringsync {
namespace {

// Checks that `path` is readable and holds a PEM block of `kind` ("CERTIFICATE",
// "PRIVATE KEY"). gRPC's file watcher only logs unreadable files, and handshakes would
// then fail with messages about the peer: say it now, naming the option.
absl::Status CheckPemFile(const std::string& path, const std::string& option,
                          absl::string_view kind) {
  std::ifstream in(path);
  if (!in) return absl::InvalidArgumentError(absl::StrCat(option, "=", path, ": cannot read it"));
  std::stringstream text;
  text << in.rdbuf();
  if (!absl::StrContains(text.str(), "-----BEGIN ") || !absl::StrContains(text.str(), kind)) {
    return absl::InvalidArgumentError(
        absl::StrCat(option, "=", path, ": not a PEM file with a ", kind));
  }
  return absl::OkStatus();
}

absl::Status CheckTlsOptions(const TransportSecurityOptions& options) {
  const std::string& p = options.name_prefix;
  if (options.tls_ca.empty() || options.tls_cert.empty() || options.tls_key.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        p, "tls_ca, ", p, "tls_cert and ", p, "tls_key go together (mutual TLS needs the CA, "
        "this process's certificate and its key); missing: ",
        options.tls_ca.empty() ? absl::StrCat(p, "tls_ca ") : "",
        options.tls_cert.empty() ? absl::StrCat(p, "tls_cert ") : "",
        options.tls_key.empty() ? absl::StrCat(p, "tls_key") : ""));
  }
  if (options.tls_reload_interval < absl::Seconds(1)) {
    return absl::InvalidArgumentError(absl::StrCat(p, "tls_reload_interval must be at least 1s"));
  }
  if (absl::Status s = CheckPemFile(options.tls_ca, p + "tls_ca", "CERTIFICATE"); !s.ok()) return s;
  if (absl::Status s = CheckPemFile(options.tls_cert, p + "tls_cert", "CERTIFICATE"); !s.ok()) {
    return s;
  }
  return CheckPemFile(options.tls_key, p + "tls_key", "PRIVATE KEY");
}

// Adds "authorization: Bearer TOKEN" to every call of a channel.
class TokenInterceptor final : public grpc::experimental::Interceptor {
 public:
  explicit TokenInterceptor(const std::string& bearer) : bearer_(bearer) {}
  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::PRE_SEND_INITIAL_METADATA)) {
      methods->GetSendInitialMetadata()->insert({kAuthorizationKey, bearer_});
    }
    methods->Proceed();
  }

 private:
  const std::string& bearer_;  // owned by the factory, which outlives the channel's calls
};

class TokenInterceptorFactory final
    : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  explicit TokenInterceptorFactory(const std::string& token)
      : bearer_(absl::StrCat(kBearerPrefix, token)) {}
  grpc::experimental::Interceptor* CreateClientInterceptor(
      grpc::experimental::ClientRpcInfo* /*info*/) override {
    return new TokenInterceptor(bearer_);  // gRPC owns interceptors
  }

 private:
  const std::string bearer_;
};

}  // namespace

absl::StatusOr<TransportSecurity> TransportSecurity::Create(const TransportSecurityOptions& options) {
  TransportSecurity security;
  const bool any_tls = !options.tls_ca.empty() || !options.tls_cert.empty() || !options.tls_key.empty();
  if (any_tls) {
    if (absl::Status s = CheckTlsOptions(options); !s.ok()) return s;
    security.certificates_ = std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
        options.tls_key, options.tls_cert, options.tls_ca,
        static_cast<unsigned int>(absl::ToInt64Seconds(options.tls_reload_interval)));
  }
  if (!options.token_file.empty()) {
    absl::StatusOr<std::string> token =
        ReadClusterToken(options.token_file, options.name_prefix + "token_file");
    if (!token.ok()) return token.status();
    security.token_ = *std::move(token);
  }
  return security;
}

std::string TransportSecurity::Describe() const {
  if (tls() && has_token()) return "mutual TLS and a cluster token";
  if (tls()) return "mutual TLS";
  if (has_token()) return "a cluster token";
  return "no authentication";
}

std::shared_ptr<grpc::ServerCredentials> TransportSecurity::ServerCredentials(
    RefusalReporter refusals) const {
  std::shared_ptr<const TokenCheck> check;
  if (has_token()) check = std::make_shared<TokenCheck>(token_, std::move(refusals));
  if (!tls()) return check ? PlaintextWithToken(std::move(check)) : grpc::InsecureServerCredentials();
  grpc::experimental::TlsServerCredentialsOptions tls_options(certificates_);
  tls_options.watch_root_certs();
  tls_options.watch_identity_key_cert_pairs();
  // Mutual: a client without a certificate signed by the CA fails the handshake.
  tls_options.set_cert_request_type(GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  std::shared_ptr<grpc::ServerCredentials> credentials =
      grpc::experimental::TlsServerCredentials(tls_options);
  if (check) credentials->SetAuthMetadataProcessor(TokenProcessor(std::move(check)));
  return credentials;
}

std::shared_ptr<grpc::Channel> TransportSecurity::CreateChannel(
    const std::string& target, const grpc::ChannelArguments& args) const {
  if (absl::StartsWith(target, "unix:") || insecure()) {
    return grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args);
  }
  std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials();
  if (tls()) {
    grpc::experimental::TlsChannelCredentialsOptions tls_options;
    tls_options.set_certificate_provider(certificates_);
    tls_options.watch_root_certs();
    tls_options.watch_identity_key_cert_pairs();
    credentials = grpc::experimental::TlsCredentials(tls_options);
  }
  std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>> interceptors;
  if (has_token()) interceptors.push_back(std::make_unique<TokenInterceptorFactory>(token_));
  return grpc::experimental::CreateCustomChannelWithInterceptors(target, credentials, args,
                                                                 std::move(interceptors));
}

}  // namespace ringsync
