// IncomingRecords: the reading end of a data connection (data_connection.h) for a thread
// that reads only when it wants a record — the ring's receiver, while it waits for its next
// frame — so that a frame reaches it without a hand-off between threads. TryRead never
// blocks: it takes what the connection holds and keeps a record read in part for the next
// call. Wait sleeps until the connection has bytes for it (or ended) or Wake is called.
//
// Thread-safety: TryRead from one thread at a time; Wait from one thread; Wake and Close
// from any.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "daemon/process/unique_fd.h"
#include "daemon/transport/tcp/record_seal.h"

namespace ringsync {

// One record as read: `size` bytes in storage of its own, which is not zeroed first (a
// segment's megabyte would be written twice).
struct ReceivedRecord {
  std::unique_ptr<std::byte[]> bytes;
  size_t size = 0;
  absl::Span<const std::byte> span() const { return {bytes.get(), size}; }
};

class IncomingRecords {
 public:
  // `connection`: an accepted data connection (made non-blocking here); a record longer
  // than `max_record_bytes` is refused (TryRead). `opener`: every record comes sealed
  // (record_seal.h) and is opened before TryRead returns it (its tag not counted in
  // `max_record_bytes`); null: records come in the clear.
  static absl::StatusOr<std::unique_ptr<IncomingRecords>> Adopt(
      UniqueFd connection, uint64_t max_record_bytes, std::unique_ptr<RecordOpener> opener = nullptr);

  // The next whole record, or nullopt when the connection holds no more of it yet.
  // OutOfRange when the connection ended cleanly between records; DataLoss when it ended
  // inside one, a record's length is 0 or over `max_record_bytes`, or a sealed record does
  // not open (altered, out of order, not sealed with the key); Unavailable when the
  // connection failed (reset). After an error the connection is unusable.
  absl::StatusOr<std::optional<ReceivedRecord>> TryRead();
  // Sleeps until the connection may have bytes for TryRead (or has ended), Wake was called
  // (since the last Wait returned), or `max_wait` passed.
  void Wait(absl::Duration max_wait);
  // Ends a Wait in progress, or the next one at once.
  void Wake();
  // Shuts the connection down: the sender sees it end.
  void Close();

 private:
  IncomingRecords(UniqueFd connection, UniqueFd wake, uint64_t max_record_bytes,
                  std::unique_ptr<RecordOpener> opener)
      : connection_(std::move(connection)),
        wake_(std::move(wake)),
        max_record_bytes_(max_record_bytes),
        opener_(std::move(opener)) {}

  const UniqueFd connection_;  // non-blocking
  const UniqueFd wake_;        // an eventfd
  const uint64_t max_record_bytes_;      // on the wire: the plaintext's bound, + a tag if sealed
  const std::unique_ptr<RecordOpener> opener_;
  // The record being read: its length's bytes first, then its own.
  std::array<std::byte, 4> length_bytes_{};
  size_t length_got_ = 0;
  ReceivedRecord record_;
  size_t record_got_ = 0;
};

}  // namespace ringsync
