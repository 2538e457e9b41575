#include "wire/security/cluster_token.h"

#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace ringsync {
namespace {

// Tokens longer than this are a mistake (a certificate named as the token file?).
constexpr size_t kMaxTokenBytes = 4096;

}  // namespace

absl::StatusOr<std::string> ReadClusterToken(const std::string& path, absl::string_view flag) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, "=", path, ": cannot read the cluster token file"));
  }
  std::stringstream text;
  text << in.rdbuf();
  const std::string token(absl::StripAsciiWhitespace(text.str()));
  if (token.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        flag, "=", path, ": the cluster token file is empty; put a random secret in it, e.g. "
        "'head -c 32 /dev/urandom | base64 > FILE'"));
  }
  if (token.size() > kMaxTokenBytes || token.find_first_of("\r\n") != std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(
        flag, "=", path, ": a cluster token is one line of at most ", kMaxTokenBytes, " bytes"));
  }
  return token;
}

bool BearerMatches(absl::string_view authorization, absl::string_view token) {
  if (!absl::StartsWith(authorization, kBearerPrefix)) return false;
  const absl::string_view presented = authorization.substr(sizeof(kBearerPrefix) - 1);
  // Every byte of the expected token is compared whatever the presented one holds, so the
  // time tells an attacker at most the token's length.
  unsigned char difference = presented.size() == token.size() ? 0 : 1;
  for (size_t i = 0; i < token.size(); ++i) {
    const unsigned char got = i < presented.size() ? presented[i] : 0;
    difference |= static_cast<unsigned char>(got ^ static_cast<unsigned char>(token[i]));
  }
  return difference == 0;
}

}  // namespace ringsync
