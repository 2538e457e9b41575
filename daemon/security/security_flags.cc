#include "daemon/security/security_flags.h"

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "spdlog/spdlog.h"
#include "wire/security/cluster_token.h"

ABSL_FLAG(std::string, tls_ca, "",
          "PEM file of the CA that signs every ringsync certificate. With --tls_cert and "
          "--tls_key: mutual TLS on every TCP port and channel (peers must present a "
          "certificate from this CA). See deploy/make-certs.sh.");
ABSL_FLAG(std::string, tls_cert, "",
          "PEM certificate (chain) of this daemon. A worker's must name it as "
          "URI:ringsync://worker/WORKER_ID, and the hosts it is dialled by as DNS/IP names.");
ABSL_FLAG(std::string, tls_key, "", "PEM private key of --tls_cert.");
ABSL_FLAG(absl::Duration, tls_reload_interval, absl::Seconds(10),
          "how often the --tls_* files are read again: replaced certificates take effect "
          "without a restart (for new connections).");
ABSL_FLAG(std::string, token_file, "",
          "file holding the cluster token, a shared secret every call must carry (sent as "
          "'authorization: Bearer TOKEN'). Proves membership of the cluster, not which worker "
          "a caller is; combine with mutual TLS for that. Also the HTTP port's bearer token "
          "unless --http_token_file is set.");
ABSL_FLAG(std::string, http_token_file, "",
          "file holding the bearer token the HTTP port (--http_listen) requires "
          "('Authorization: Bearer TOKEN'; Prometheus: authorization.credentials_file). "
          "Default: the --token_file token.");
ABSL_FLAG(bool, insecure, false,
          "serve and dial TCP without any authentication: anyone who reaches a port can join "
          "the ring, read and corrupt gradients. For a laptop only; logged as a warning.");

namespace ringsync {

absl::StatusOr<DaemonSecurity> DaemonSecurityFromFlags(bool http_listen) {
  TransportSecurityOptions options;
  options.tls_ca = absl::GetFlag(FLAGS_tls_ca);
  options.tls_cert = absl::GetFlag(FLAGS_tls_cert);
  options.tls_key = absl::GetFlag(FLAGS_tls_key);
  options.tls_reload_interval = absl::GetFlag(FLAGS_tls_reload_interval);
  options.token_file = absl::GetFlag(FLAGS_token_file);
  const std::string http_token_file = absl::GetFlag(FLAGS_http_token_file);
  const bool secured = !options.tls_ca.empty() || !options.tls_cert.empty() ||
                       !options.tls_key.empty() || !options.token_file.empty();
  if (absl::GetFlag(FLAGS_insecure)) {
    if (secured || !http_token_file.empty()) {
      return absl::InvalidArgumentError(
          "--insecure turns authentication off; it cannot be combined with --tls_*, "
          "--token_file or --http_token_file");
    }
    spdlog::warn(
        "--insecure: serving TCP without authentication; anyone who reaches this daemon's "
        "ports can join the ring, submit and read gradients. Use --tls_ca/--tls_cert/--tls_key "
        "or --token_file outside a laptop");
    return DaemonSecurity{};
  }
  if (!secured) {
    return absl::InvalidArgumentError(
        "refusing to serve unauthenticated TCP: pass --tls_ca, --tls_cert and --tls_key "
        "(mutual TLS; deploy/make-certs.sh makes them), --token_file (a cluster token), or "
        "both; or --insecure to run without authentication (a laptop only)");
  }
  DaemonSecurity security;
  absl::StatusOr<TransportSecurity> transport = TransportSecurity::Create(options);
  if (!transport.ok()) return transport.status();
  security.transport = *std::move(transport);
  if (!http_token_file.empty()) {
    absl::StatusOr<std::string> token = ReadClusterToken(http_token_file, "--http_token_file");
    if (!token.ok()) return token.status();
    security.http_token = *std::move(token);
  } else {
    security.http_token = security.transport.token();
  }
  if (http_listen && security.http_token.empty()) {
    return absl::InvalidArgumentError(
        "--http_listen needs a bearer token for the HTTP port: pass --http_token_file (or "
        "--token_file), or --insecure");
  }
  return security;
}

}  // namespace ringsync
