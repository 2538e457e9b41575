#include "daemon/coordinator/request_validation.h"

#include <arpa/inet.h>

#include <algorithm>
#include <iterator>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace ringsync {
namespace {

constexpr size_t kMaxHostBytes = 253;
constexpr size_t kMaxLabelBytes = 63;

bool IsIdChar(char c) { return absl::ascii_isalnum(c) || c == '.' || c == '_' || c == '-'; }

bool IsDnsLabel(absl::string_view label) {
  if (label.empty() || label.size() > kMaxLabelBytes) return false;
  if (label.front() == '-' || label.back() == '-') return false;
  for (char c : label) {
    // '_' is not in RFC 1123, but container runtimes hand out such names and
    // resolvers accept them.
    if (!absl::ascii_isalnum(c) && c != '-' && c != '_') return false;
  }
  return true;
}

bool IsDnsName(absl::string_view host) {
  if (host.empty() || host.size() > kMaxHostBytes) return false;
  for (absl::string_view label : absl::StrSplit(host, '.')) {
    if (!IsDnsLabel(label)) return false;
  }
  return true;
}

bool LooksNumeric(absl::string_view host) {
  for (char c : host) {
    if (!absl::ascii_isdigit(c) && c != '.') return false;
  }
  return true;
}

// inet_pton into `out` (room for an IPv6 address); true when `host` parses.
bool ParseIp(int family, absl::string_view host, unsigned char* out) {
  const std::string text(host);
  return inet_pton(family, text.c_str(), out) == 1;
}

absl::Status BadAddress(absl::string_view field, absl::string_view address,
                        absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(
      field, " '", SanitizeText(address, kMaxAddressBytes), "' is invalid: ", why,
      "; expected HOST:PORT, e.g. 10.0.0.5:7500, worker-3.example:7500 or [fd00::5]:7500"));
}

}  // namespace

absl::Status ValidateWorkerId(absl::string_view worker_id) {
  bool ok = !worker_id.empty() && worker_id.size() <= kMaxWorkerIdBytes &&
            absl::ascii_isalnum(worker_id.front());
  for (char c : worker_id) ok = ok && IsIdChar(c);
  if (ok) return absl::OkStatus();
  const std::string shown =
      worker_id.empty() ? "empty" : absl::StrCat("'", SanitizeText(worker_id, 80), "'");
  return absl::InvalidArgumentError(absl::StrCat(
      "worker_id ", shown, " is invalid: use 1-", kMaxWorkerIdBytes,
      " characters from [A-Za-z0-9._-] starting with a letter or digit (e.g. --worker_id=w0)"));
}

absl::Status ValidateHostPort(absl::string_view field, absl::string_view address,
                              bool reachable) {
  if (address.empty()) return BadAddress(field, address, "it is empty");
  if (address.size() > kMaxAddressBytes) {
    return BadAddress(field, address, absl::StrCat("longer than ", kMaxAddressBytes, " bytes"));
  }
  const size_t colon = address.rfind(':');
  if (colon == absl::string_view::npos) return BadAddress(field, address, "it has no port");
  absl::string_view host = address.substr(0, colon);
  const absl::string_view port_text = address.substr(colon + 1);

  int port = 0;
  bool port_ok = !port_text.empty() && port_text.size() <= 5;
  for (char c : port_text) port_ok = port_ok && absl::ascii_isdigit(c);
  port_ok = port_ok && absl::SimpleAtoi(port_text, &port) && port >= 1 && port <= 65535;
  if (!port_ok) return BadAddress(field, address, "the port must be a number in 1..65535");

  bool wildcard = false;
  unsigned char ip[sizeof(struct in6_addr)] = {};
  if (!host.empty() && host.front() == '[') {
    if (host.size() < 3 || host.back() != ']' ||
        !ParseIp(AF_INET6, host.substr(1, host.size() - 2), ip)) {
      return BadAddress(field, address, "the bracketed host is not an IPv6 address");
    }
    wildcard = std::all_of(std::begin(ip), std::end(ip), [](unsigned char b) { return b == 0; });
  } else if (LooksNumeric(host)) {
    if (!ParseIp(AF_INET, host, ip)) {
      return BadAddress(field, address, "the host is not a dotted IPv4 address");
    }
    wildcard = host == "0.0.0.0";
  } else if (!IsDnsName(host)) {
    return BadAddress(field, address,
                      "the host is not a DNS name (labels of [A-Za-z0-9_-]), an IPv4 address "
                      "or a bracketed IPv6 address");
  }
  if (reachable && wildcard) {
    return BadAddress(field, address,
                      "a wildcard host cannot be reached by other workers; advertise an "
                      "address they can connect to");
  }
  return absl::OkStatus();
}

absl::Status ValidateIncarnation(absl::string_view worker_id, uint64_t incarnation) {
  if (incarnation != 0) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "worker '", SanitizeText(worker_id, kMaxWorkerIdBytes),
      "' sent no incarnation (0): every worker process picks a random non-zero one at start; "
      "run the same ringsyncd release on the coordinator and every worker"));
}

}  // namespace ringsync
