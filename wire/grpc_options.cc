#include "wire/grpc_options.h"

#include <algorithm>
#include <cstdlib>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "wire/host_port.h"

namespace ringsync {
namespace {

constexpr int kStreamWindowBytes = 8 << 20;

int Milliseconds(absl::Duration d) { return static_cast<int>(absl::ToInt64Milliseconds(d)); }

void SetCommon(grpc::ChannelArguments& args, const KeepaliveSettings& keepalive) {
  args.SetMaxReceiveMessageSize(-1);
  args.SetMaxSendMessageSize(-1);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, Milliseconds(keepalive.time));
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, Milliseconds(keepalive.timeout));
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  // Reconnect quickly: a restarted peer or coordinator should be found in about a second.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  // gRPC reads this as the *minimum connect timeout*: how long one connection attempt
  // (TCP, TLS handshake, HTTP/2 settings) may take before it is abandoned. At 100 ms (as
  // it once was here, meant as a backoff) a loaded host or a sanitizer build failed calls
  // with "connection attempt timed out before receiving SETTINGS frame".
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 5000);
  // A name that does not resolve yet (a container or host still starting) is asked again
  // within a second, not after gRPC's default 30 s.
  args.SetInt(GRPC_ARG_DNS_MIN_TIME_BETWEEN_RESOLUTIONS_MS, 1000);
}

}  // namespace

absl::Status ValidateKeepalive(const KeepaliveSettings& keepalive) {
  for (const auto& [name, value] : {std::pair{"--keepalive_time", keepalive.time},
                                    std::pair{"--keepalive_timeout", keepalive.timeout}}) {
    if (value < absl::Milliseconds(10) || value > absl::Hours(1)) {
      return absl::InvalidArgumentError(absl::StrCat(name, "=", absl::FormatDuration(value),
                                                     " is outside 10ms..1h"));
    }
  }
  return absl::OkStatus();
}

void UseSystemResolverUnlessConfigured() {
  // overwrite = 0: an explicit GRPC_DNS_RESOLVER wins.
  setenv("GRPC_DNS_RESOLVER", "native", /*overwrite=*/0);
}

grpc::ChannelArguments PeerChannelArguments(const KeepaliveSettings& keepalive) {
  grpc::ChannelArguments args;
  SetCommon(args, keepalive);
  args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  args.SetInt(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, kStreamWindowBytes);
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return args;
}

grpc::ChannelArguments ControlChannelArguments(const KeepaliveSettings& keepalive) {
  grpc::ChannelArguments args;
  SetCommon(args, keepalive);
  return args;
}

void ConfigureServerBuilder(grpc::ServerBuilder& builder, int max_receive_message_bytes,
                            const KeepaliveSettings& keepalive) {
  builder.SetMaxReceiveMessageSize(max_receive_message_bytes);
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.SetMaxSendMessageSize(-1);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, kStreamWindowBytes);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, Milliseconds(keepalive.time));
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, Milliseconds(keepalive.timeout));
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  builder.AddChannelArgument(
      GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS,
      Milliseconds(std::min(absl::Seconds(1), keepalive.time / 2)));
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, 2);
}

absl::StatusOr<std::string> NormalizeTarget(absl::string_view address, PortUse use) {
  if (address.empty()) return absl::InvalidArgumentError("empty address");
  if (absl::StartsWith(address, "/")) return absl::StrCat("unix:", address);
  if (absl::StartsWith(address, "unix:")) return std::string(address);
  if (absl::StartsWith(address, "dns:") || absl::StartsWith(address, "ipv4:") ||
      absl::StartsWith(address, "ipv6:")) {
    return std::string(address);
  }
  absl::StatusOr<HostPort> host_port = ParseHostPort(address, use);
  if (!host_port.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(host_port.status().message(), " (or unix:/path for a unix socket)"));
  }
  return std::string(address);
}

void ListeningPort::Add(grpc::ServerBuilder& builder, const std::string& target,
                        std::shared_ptr<grpc::ServerCredentials> credentials) {
  target_ = target;
  if (credentials == nullptr) credentials = grpc::InsecureServerCredentials();
  builder.AddListeningPort(target, std::move(credentials), &selected_port_);
}

absl::StatusOr<std::string> ListeningPort::BoundAddress() const {
  if (absl::StartsWith(target_, "unix:")) return target_;
  if (selected_port_ == 0) {
    return absl::UnavailableError(absl::StrCat("could not listen on ", target_,
                                               " (address in use or not local?)"));
  }
  const size_t colon = target_.rfind(':');
  return absl::StrCat(target_.substr(0, colon), ":", selected_port_);
}

}  // namespace ringsync
