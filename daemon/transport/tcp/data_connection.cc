#include "daemon/transport/tcp/data_connection.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "daemon/transport/tcp/socket_address.h"

namespace ringsync {
namespace {

// How long one wait for room in a full connection lasts before the limit and `gone` are
// looked at again.
constexpr int kWaitSliceMillis = 20;
constexpr size_t kLengthBytes = 4;

// Waits until `fd` is ready for `events` or the limit ends; OK when ready.
absl::Status AwaitReady(int fd, short events, const WaitLimit& limit,
                        const std::function<bool()>& gone, absl::string_view waiting_for) {
  while (true) {
    pollfd p{fd, events, 0};
    if (::poll(&p, 1, kWaitSliceMillis) > 0) return absl::OkStatus();
    if (limit.IsCancelled()) return absl::CancelledError(absl::StrCat("waiting for ", waiting_for));
    if (gone && gone()) return absl::UnavailableError("the receiver's stream ended");
    if (limit.deadline.Passed()) {
      return absl::DeadlineExceededError(absl::StrCat("waiting for ", waiting_for));
    }
  }
}

}  // namespace

absl::StatusOr<UniqueFd> ConnectDataConnection(const sockaddr_storage& address, const DataKey& key,
                                               const WaitLimit& limit) {
  absl::StatusOr<UniqueFd> fd = ConnectTcp(address, limit);
  if (!fd.ok()) return fd.status();
  const auto handshake = DataHandshake(key);
  // Into an empty send buffer: it does not block.
  if (::send(fd->get(), handshake.data(), handshake.size(), MSG_NOSIGNAL) !=
      static_cast<ssize_t>(handshake.size())) {
    return absl::UnavailableError(absl::StrCat("sending the data connection's handshake to ",
                                               DescribeAddress(address), ": ", std::strerror(errno)));
  }
  if (absl::Status ready = AwaitReady(fd->get(), POLLIN, limit, nullptr, "the data connection's acceptance");
      !ready.ok()) {
    return ready;
  }
  std::byte answer{};
  if (::recv(fd->get(), &answer, 1, MSG_DONTWAIT) != 1 || answer != kDataAccepted) {
    return absl::UnavailableError(absl::StrCat("the receiver at ", DescribeAddress(address),
                                               " refused the data connection"));
  }
  return fd;
}

absl::Status RecordSender::Send(absl::Span<const absl::Span<const std::byte>> pieces,
                                const WaitLimit& limit, const std::function<bool()>& gone,
                                RecordPacing pacing) {
  if (broken_.load()) return absl::UnavailableError("the data connection broke earlier");
  Pace(pacing);
  uint64_t length = 0;
  for (absl::Span<const std::byte> piece : pieces) length += piece.size();
  const uint64_t overhead = sealer_ != nullptr ? kRecordSealTagBytes : 0;
  if (length == 0 || length + overhead > UINT32_MAX) {
    return absl::InvalidArgumentError(absl::StrCat("a record of ", length, " bytes"));
  }
  length += overhead;
  const std::byte prefix[kLengthBytes] = {
      static_cast<std::byte>(length), static_cast<std::byte>(length >> 8),
      static_cast<std::byte>(length >> 16), static_cast<std::byte>(length >> 24)};
  absl::InlinedVector<iovec, 4> vectors;
  vectors.push_back({const_cast<std::byte*>(prefix), kLengthBytes});
  if (sealer_ != nullptr) {
    if (absl::Status sealed = sealer_->Seal(prefix, pieces, sealed_); !sealed.ok()) {
      broken_ = true;  // the record's number is spent: the receiver could open no later one
      return sealed;
    }
    vectors.push_back({sealed_.data(), sealed_.size()});
  } else {
    for (absl::Span<const std::byte> piece : pieces) {
      if (!piece.empty()) vectors.push_back({const_cast<std::byte*>(piece.data()), piece.size()});
    }
  }
  size_t first = 0;  // vectors[first..] are still to go, the first one advanced in place
  while (first < vectors.size()) {
    msghdr message{};
    message.msg_iov = vectors.data() + first;
    message.msg_iovlen = std::min<size_t>(vectors.size() - first, IOV_MAX);
    ssize_t sent = ::sendmsg(fd_.get(), &message, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (sent < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) {
        if (absl::Status ready = AwaitReady(fd_.get(), POLLOUT, limit, gone, "room in the data connection");
            !ready.ok()) {
          broken_ = true;
          return ready;
        }
        continue;
      }
      broken_ = true;
      return absl::UnavailableError(absl::StrCat("the data connection failed: ", std::strerror(errno)));
    }
    while (sent > 0) {
      iovec& v = vectors[first];
      const size_t taken = std::min(static_cast<size_t>(sent), v.iov_len);
      v.iov_base = static_cast<std::byte*>(v.iov_base) + taken;
      v.iov_len -= taken;
      sent -= static_cast<ssize_t>(taken);
      if (v.iov_len == 0) ++first;
    }
  }
  return absl::OkStatus();
}

void RecordSender::Pace(RecordPacing pacing) {
  if (pacing == pacing_) return;
  pacing_ = pacing;
  // 0 restores the host's default (net.ipv4.tcp_notsent_lowat: no limit unless set). A
  // socket that is not TCP (a test's socket pair) refuses: it has nothing to pace.
  const int unsent = pacing == RecordPacing::kPaced ? kPacedUnsentBytes : 0;
  (void)::setsockopt(fd_.get(), IPPROTO_TCP, TCP_NOTSENT_LOWAT, &unsent, sizeof(unsent));
}

void RecordSender::Close() {
  broken_ = true;
  ::shutdown(fd_.get(), SHUT_RDWR);
}

}  // namespace ringsync
