#include "daemon/worker/descriptor_inbox.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"
#include "wire/unix_socket_address.h"

namespace ringsync {
namespace {

// Room for one descriptor more than a handover may carry, so that a second one is seen
// (and closed) rather than cut off unnoticed.
constexpr size_t kControlBytes = CMSG_SPACE(2 * sizeof(int));

// Connections waiting for their handover at once; more wait in the listen backlog.
constexpr size_t kMaxPending = 16;

// A connection accepted and not yet answered.
struct Pending {
  UniqueFd connection;
  SteadyDeadline until;  // then it is closed unanswered
};

// poll's timeout: until the earliest deadline of `pending`, rounded up; -1 (none) if empty.
int MillisecondsToEarliest(const std::vector<Pending>& pending) {
  if (pending.empty()) return -1;
  absl::Duration left = absl::InfiniteDuration();
  for (const Pending& p : pending) left = std::min(left, p.until.Left());
  return static_cast<int>(absl::ToInt64Milliseconds(absl::Ceil(left, absl::Milliseconds(1))));
}

// Every descriptor in `message`'s control data, owned.
std::vector<UniqueFd> ReceivedDescriptors(msghdr& message) {
  std::vector<UniqueFd> fds;
  for (cmsghdr* c = CMSG_FIRSTHDR(&message); c != nullptr; c = CMSG_NXTHDR(&message, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    const size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count; ++i) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
      fds.emplace_back(fd);
    }
  }
  return fds;
}

}  // namespace

absl::StatusOr<std::unique_ptr<DescriptorInbox>> DescriptorInbox::Listen(
    const std::string& path, DescriptorInboxLimits limits, RefusalReporter refused) {
  absl::StatusOr<sockaddr_un> address = UnixSocketAddress(path);
  if (!address.ok()) return address.status();
  UniqueFd listen(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!listen.valid()) return absl::InternalError(absl::StrCat("socket: ", std::strerror(errno)));
  if (::bind(listen.get(), reinterpret_cast<const sockaddr*>(&*address), sizeof(*address)) != 0 ||
      ::listen(listen.get(), 64) != 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on unix socket ", path, ": ", std::strerror(errno)));
  }
  UniqueFd wake(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!wake.valid()) return absl::InternalError(absl::StrCat("eventfd: ", std::strerror(errno)));
  return std::unique_ptr<DescriptorInbox>(
      new DescriptorInbox(path, limits, std::move(refused), std::move(listen), std::move(wake)));
}

DescriptorInbox::DescriptorInbox(std::string path, DescriptorInboxLimits limits,
                                 RefusalReporter refused, UniqueFd listen, UniqueFd wake)
    : path_(std::move(path)),
      limits_(limits),
      refused_(std::move(refused)),
      listen_(std::move(listen)),
      wake_(std::move(wake)) {
  thread_ = std::thread([this] { AcceptLoop(); });
}

void DescriptorInbox::Refuse(absl::string_view reason, absl::string_view detail) const {
  if (refused_) refused_(reason, absl::StrCat("a descriptor handed over on ", path_, ": ", detail));
}

DescriptorInbox::~DescriptorInbox() {
  const uint64_t one = 1;
  (void)!::write(wake_.get(), &one, sizeof(one));
  thread_.join();
  ::unlink(path_.c_str());
}

absl::StatusOr<UniqueFd> DescriptorInbox::Take(absl::string_view nonce) {
  absl::MutexLock lock(&mu_);
  DropExpiredLocked();
  auto it = held_.find(nonce);
  if (it == held_.end()) {
    return absl::NotFoundError(absl::StrCat(
        "no descriptor was handed over on ", path_, " under that nonce (or it waited longer than ",
        absl::FormatDuration(limits_.hold_for), ")"));
  }
  UniqueFd fd = std::move(it->second.fd);
  held_.erase(it);
  return fd;
}

void DescriptorInbox::DropExpiredLocked() {
  absl::erase_if(held_, [](const auto& entry) { return entry.second.until.Passed(); });
}

void DescriptorInbox::AcceptLoop() {
  std::vector<Pending> pending;
  std::vector<pollfd> waits;
  while (true) {
    // [0] the end, [1] the next connection (while there is room), then each pending one.
    const short accepting = pending.size() < kMaxPending ? POLLIN : 0;
    waits.assign({pollfd{wake_.get(), POLLIN, 0}, pollfd{listen_.get(), accepting, 0}});
    for (const Pending& p : pending) waits.push_back(pollfd{p.connection.get(), POLLIN, 0});
    if (::poll(waits.data(), waits.size(), MillisecondsToEarliest(pending)) < 0 &&
        errno != EINTR) {
      spdlog::error("descriptor socket {}: poll: {}", path_, std::strerror(errno));
      return;
    }
    if (waits[0].revents != 0) return;
    // From the back, so that erasing leaves the indices of the others in `waits` valid.
    for (size_t i = pending.size(); i-- > 0;) {
      if (waits[i + 2].revents != 0) {
        Receive(pending[i].connection);
      } else if (pending[i].until.Passed()) {  // silent: closed unanswered
        Refuse("descriptor_handover_timeout",
               absl::StrCat("nothing sent within ", absl::FormatDuration(limits_.handover_timeout)));
      } else {
        continue;
      }
      pending.erase(pending.begin() + static_cast<ptrdiff_t>(i));
    }
    if (waits[1].revents == 0) continue;
    UniqueFd connection(::accept4(listen_.get(), nullptr, nullptr, SOCK_CLOEXEC));
    if (connection.valid()) {
      pending.push_back(Pending{std::move(connection), SteadyDeadline(limits_.handover_timeout)});
    } else if (errno == EMFILE || errno == ENFILE) {
      ::poll(nullptr, 0, 100);  // let some close
    }
  }
}

void DescriptorInbox::Receive(const UniqueFd& connection) {
  char nonce[kDescriptorNonceBytes + 1];
  alignas(cmsghdr) char control[kControlBytes];
  iovec data{nonce, sizeof(nonce)};
  msghdr message{};
  message.msg_iov = &data;
  message.msg_iovlen = 1;
  message.msg_control = control;
  message.msg_controllen = sizeof(control);
  const ssize_t got = ::recvmsg(connection.get(), &message, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
  std::vector<UniqueFd> fds = got >= 0 ? ReceivedDescriptors(message) : std::vector<UniqueFd>{};
  const bool well_formed = got == static_cast<ssize_t>(kDescriptorNonceBytes) &&
                           fds.size() == 1 && (message.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) == 0;
  bool held = false;
  if (!well_formed) {
    Refuse("descriptor_handover_malformed",
           absl::StrCat(got, " bytes with ", fds.size(), " descriptors; one descriptor with a ",
                        kDescriptorNonceBytes, "-byte nonce expected"));
  } else {
    absl::MutexLock lock(&mu_);
    DropExpiredLocked();
    std::string key(nonce, kDescriptorNonceBytes);
    if (held_.size() < limits_.max_held && !held_.contains(key)) {
      held_.emplace(std::move(key), Held{std::move(fds[0]), SteadyDeadline(limits_.hold_for)});
      held = true;
    } else {
      Refuse("descriptor_handover_full",
             absl::StrCat(held_.size(), " wait to be registered (at most ", limits_.max_held,
                          "), or its nonce waits already"));
    }
  }
  const char answer = held ? 'Y' : 'N';
  (void)!::send(connection.get(), &answer, 1, MSG_DONTWAIT | MSG_NOSIGNAL);
}

}  // namespace ringsync
