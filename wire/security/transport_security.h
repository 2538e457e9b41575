// TransportSecurity: how one process authenticates its TCP channels — mutual TLS with
// certificates reloaded from files, a cluster token, both, or (explicitly) neither.
// One object per process, shared by every server port and channel it makes, so the
// certificate files are watched once.
//
//   servers: ServerCredentials() for each TCP port — with TLS the client must present a
//            certificate signed by the CA; with a token every call must carry it.
//   clients: CreateChannel() — presents the certificate, verifies the server's against
//            the CA and the host name dialled, and sends the token on every call.
// unix: targets and ports are local: they get neither (the worker checks its socket's
// peer with SO_PEERCRED instead).
//
// Thread-safety: const methods are safe from any thread.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/security/tls_certificate_provider.h"
#include "wire/security/token_check.h"

namespace ringsync {

struct TransportSecurityOptions {
  // PEM files. All three or none: the CA that signs every peer's certificate, this
  // process's certificate chain and its private key.
  std::string tls_ca;
  std::string tls_cert;
  std::string tls_key;
  // How often the certificate files are read again: replaced files take effect without
  // a restart (new connections use them; open ones keep theirs).
  absl::Duration tls_reload_interval = absl::Seconds(10);
  // A file holding the cluster token; empty for none.
  std::string token_file;
  // How messages name the options above: "--" for flags ("--tls_ca"), "" for SDK options.
  std::string name_prefix = "--";
};

class TransportSecurity {
 public:
  // Plain TCP: nothing presented, nothing checked.
  TransportSecurity() = default;

  // Reads the token file and checks the certificate files (readable, PEM). InvalidArgument
  // naming the option and file otherwise.
  static absl::StatusOr<TransportSecurity> Create(const TransportSecurityOptions& options);

  bool tls() const { return certificates_ != nullptr; }
  bool has_token() const { return !token_.empty(); }
  bool insecure() const { return !tls() && !has_token(); }
  // "mutual TLS and a cluster token", "mutual TLS", "a cluster token" or "no authentication".
  std::string Describe() const;
  // The cluster token (empty when none), e.g. for the HTTP port's bearer check.
  const std::string& token() const { return token_; }

  // Credentials for a TCP listening port; `refusals` hears of every refused call.
  std::shared_ptr<grpc::ServerCredentials> ServerCredentials(RefusalReporter refusals) const;

  // A channel to `target` ("host:port", or "unix:PATH": plain) with these credentials.
  std::shared_ptr<grpc::Channel> CreateChannel(const std::string& target,
                                               const grpc::ChannelArguments& args) const;

 private:
  std::shared_ptr<grpc::experimental::CertificateProviderInterface> certificates_;
  std::string token_;
};

}  // namespace ringsync
