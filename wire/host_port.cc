#include "wire/host_port.h"

#include <arpa/inet.h>

#include <algorithm>
#include <iterator>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace ringsync {
namespace {

constexpr size_t kMaxHostBytes = 253;
constexpr size_t kMaxLabelBytes = 63;
constexpr size_t kShownBytes = 96;  // of an address quoted in an error

bool IsDnsLabel(absl::string_view label) {
  if (label.empty() || label.size() > kMaxLabelBytes) return false;
  if (label.front() == '-' || label.back() == '-') return false;
  // '_' is not in RFC 1123, but container runtimes hand out such names and resolvers
  // accept them.
  return std::all_of(label.begin(), label.end(),
                     [](char c) { return absl::ascii_isalnum(c) || c == '-' || c == '_'; });
}

bool IsDnsName(absl::string_view host) {
  if (host.empty() || host.size() > kMaxHostBytes) return false;
  for (absl::string_view label : absl::StrSplit(host, '.')) {
    if (!IsDnsLabel(label)) return false;
  }
  return true;
}

bool LooksNumeric(absl::string_view host) {
  return std::all_of(host.begin(), host.end(),
                     [](char c) { return absl::ascii_isdigit(c) || c == '.'; });
}

bool IsIp(int family, absl::string_view host) {
  unsigned char bytes[sizeof(in6_addr)];
  return inet_pton(family, std::string(host).c_str(), bytes) == 1;
}

std::string Quoted(absl::string_view text) {
  const absl::string_view shown = text.substr(0, kShownBytes);
  return absl::StrCat("'", absl::CHexEscape(shown), shown.size() < text.size() ? "..." : "", "'");
}

absl::Status NotHostPort(absl::string_view address, absl::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat(Quoted(address), " is not HOST:PORT: ", why,
                   "; e.g. 10.0.0.5:7500, worker-3.example:7500 or [fd00::5]:7500"));
}

// Removes the brackets around `host`, if it has them; whether it had.
bool StripBrackets(absl::string_view& host) {
  if (host.size() < 2 || host.front() != '[' || host.back() != ']') return false;
  host = host.substr(1, host.size() - 2);
  return true;
}

// Why `host` (brackets removed, `bracketed` saying whether it had them) names no host,
// or empty when it names one.
std::string HostProblem(absl::string_view host, bool bracketed) {
  if (host.empty()) return "it has no host";
  if (bracketed) return IsIp(AF_INET6, host) ? "" : "the bracketed host is not an IPv6 address";
  if (host.find(':') != absl::string_view::npos) return "an IPv6 host must be in brackets";
  if (LooksNumeric(host)) return IsIp(AF_INET, host) ? "" : "the host is not a dotted IPv4 address";
  return IsDnsName(host) ? "" : "the host is not a DNS name (labels of [A-Za-z0-9_-])";
}

}  // namespace

bool HostPort::is_ipv6() const { return host.find(':') != std::string::npos; }

bool HostPort::is_address() const { return is_ipv6() || IsIp(AF_INET, host); }

bool HostPort::is_wildcard() const {
  if (!is_ipv6()) return host == "0.0.0.0";
  unsigned char bytes[sizeof(in6_addr)] = {};
  return inet_pton(AF_INET6, host.c_str(), bytes) == 1 &&
         std::all_of(std::begin(bytes), std::end(bytes), [](unsigned char b) { return b == 0; });
}

std::string HostPort::ToString() const {
  return is_ipv6() ? absl::StrCat("[", host, "]:", port) : absl::StrCat(host, ":", port);
}

absl::StatusOr<HostPort> ParseHostPort(absl::string_view address, PortUse use) {
  if (address.empty()) return NotHostPort(address, "it is empty");
  if (address.size() > kMaxHostPortBytes) {
    return NotHostPort(address, absl::StrCat("it is longer than ", kMaxHostPortBytes, " bytes"));
  }
  const size_t colon = address.rfind(':');
  if (colon == absl::string_view::npos) return NotHostPort(address, "it has no port");
  absl::string_view host = address.substr(0, colon);
  const absl::string_view port_text = address.substr(colon + 1);

  const int lowest = use == PortUse::kListen ? 0 : 1;
  int port = -1;
  const bool digits = !port_text.empty() && port_text.size() <= 5 &&
                      std::all_of(port_text.begin(), port_text.end(), absl::ascii_isdigit);
  if (!digits || !absl::SimpleAtoi(port_text, &port) || port < lowest || port > 65535) {
    return NotHostPort(address, use == PortUse::kListen
                                    ? "the port must be a number in 0..65535 (0: any free port)"
                                    : "the port must be a number in 1..65535");
  }
  const bool bracketed = StripBrackets(host);
  if (const std::string why = HostProblem(host, bracketed); !why.empty()) {
    return NotHostPort(address, why);
  }
  return HostPort{std::string(host), port};
}

absl::StatusOr<std::string> ParseHost(absl::string_view host) {
  if (host.size() > kMaxHostPortBytes) {
    return absl::InvalidArgumentError(absl::StrCat(Quoted(host), " is not a host: it is longer than ",
                                                    kMaxHostPortBytes, " bytes"));
  }
  absl::string_view bare = host;
  const bool ipv6 = StripBrackets(bare) || bare.find(':') != absl::string_view::npos;
  if (const std::string why = HostProblem(bare, ipv6); !why.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        Quoted(host), " is not a host: ", why, "; e.g. 10.0.0.5, worker-3.example or fd00::5"));
  }
  return std::string(bare);
}

}  // namespace ringsync
