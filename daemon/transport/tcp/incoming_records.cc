#include "daemon/transport/tcp/incoming_records.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace ringsync {
namespace {

// Reads what the connection holds into [to, to + bytes): how many came; 0 with `ended`
// set when the connection ended.
absl::StatusOr<size_t> ReadSome(int fd, std::byte* to, size_t bytes, bool& ended) {
  while (true) {
    const ssize_t n = ::recv(fd, to, bytes, MSG_DONTWAIT);
    if (n > 0) return static_cast<size_t>(n);
    if (n == 0) {
      ended = true;
      return 0;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
    return absl::UnavailableError(absl::StrCat("the data connection failed: ", std::strerror(errno)));
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<IncomingRecords>> IncomingRecords::Adopt(
    UniqueFd connection, uint64_t max_record_bytes, std::unique_ptr<RecordOpener> opener) {
  const int flags = ::fcntl(connection.get(), F_GETFL);
  if (flags < 0 || ::fcntl(connection.get(), F_SETFL, flags | O_NONBLOCK) < 0) {
    return absl::InternalError(absl::StrCat("fcntl: ", std::strerror(errno)));
  }
  UniqueFd wake(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!wake.valid()) return absl::InternalError(absl::StrCat("eventfd: ", std::strerror(errno)));
  if (opener != nullptr) max_record_bytes += kRecordSealTagBytes;
  return std::unique_ptr<IncomingRecords>(new IncomingRecords(
      std::move(connection), std::move(wake), max_record_bytes, std::move(opener)));
}

absl::StatusOr<std::optional<ReceivedRecord>> IncomingRecords::TryRead() {
  bool ended = false;
  while (length_got_ < length_bytes_.size()) {
    absl::StatusOr<size_t> got = ReadSome(connection_.get(), length_bytes_.data() + length_got_,
                                          length_bytes_.size() - length_got_, ended);
    if (!got.ok()) return got.status();
    if (ended) {
      if (length_got_ == 0) return absl::OutOfRangeError("the data connection closed");
      return absl::DataLossError("the data connection ended inside a record's length");
    }
    if (*got == 0) return std::nullopt;
    length_got_ += *got;
    if (length_got_ < length_bytes_.size()) continue;
    uint64_t length = 0;
    for (size_t i = 0; i < length_bytes_.size(); ++i) {
      length |= static_cast<uint64_t>(length_bytes_[i]) << (8 * i);
    }
    if (length == 0 || length > max_record_bytes_) {
      return absl::DataLossError(absl::StrCat("a data connection record of ", length, " bytes (1..",
                                              max_record_bytes_, " allowed)"));
    }
    record_ = ReceivedRecord{std::make_unique_for_overwrite<std::byte[]>(length), length};
    record_got_ = 0;
  }
  while (record_got_ < record_.size) {
    absl::StatusOr<size_t> got = ReadSome(connection_.get(), record_.bytes.get() + record_got_,
                                          record_.size - record_got_, ended);
    if (!got.ok()) return got.status();
    if (ended) {
      return absl::DataLossError(absl::StrCat("the data connection ended after ", record_got_,
                                              " of a ", record_.size, "-byte record"));
    }
    if (*got == 0) return std::nullopt;
    record_got_ += *got;
  }
  length_got_ = 0;
  record_got_ = 0;
  if (opener_ != nullptr) {
    absl::StatusOr<size_t> plain =
        opener_->Open(length_bytes_, absl::MakeSpan(record_.bytes.get(), record_.size));
    if (!plain.ok()) return plain.status();
    if (*plain == 0) return absl::DataLossError("an empty sealed record on the data connection");
    record_.size = *plain;
  }
  return std::optional<ReceivedRecord>(std::move(record_));
}

void IncomingRecords::Wait(absl::Duration max_wait) {
  pollfd polled[] = {{connection_.get(), POLLIN, 0}, {wake_.get(), POLLIN, 0}};
  const int64_t millis = std::max<int64_t>(0, absl::ToInt64Milliseconds(absl::Ceil(max_wait, absl::Milliseconds(1))));
  if (::poll(polled, 2, static_cast<int>(std::min<int64_t>(millis, 1 << 30))) > 0 &&
      polled[1].revents != 0) {
    uint64_t wakes = 0;
    (void)!::read(wake_.get(), &wakes, sizeof(wakes));
  }
}

void IncomingRecords::Wake() {
  const uint64_t one = 1;
  (void)!::write(wake_.get(), &one, sizeof(one));
}

void IncomingRecords::Close() { ::shutdown(connection_.get(), SHUT_RDWR); }

}  // namespace ringsync
