// A ring stream's data connection (data_key.h): a plain TCP connection that carries the
// stream's frames as records — a 4-byte little-endian length, then the frame as
// FrameHead + payload (daemon/transport/grpc/frame_codec.h), exactly a frame mailbox's
// record — so that a frame costs a write and a read, not gRPC's HTTP/2 framing and its
// thread hand-offs. The gRPC stream it belongs to stays open beside it for the hello, the
// acceptance and the sender's liveness. Under mutual TLS every record is sealed
// (record_seal.h): the length prefix stays in the clear, the rest is ciphertext and tag.
#pragma once

#include <sys/socket.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "core/sync/wait_limit.h"
#include "daemon/transport/tcp/data_key.h"
#include "daemon/transport/tcp/record_seal.h"
#include "daemon/process/unique_fd.h"

namespace ringsync {

// Connects to a receiver's data port at `address`, presents `key` and waits within
// `limit` for its acceptance. Unavailable when it refused (closed the connection).
absl::StatusOr<UniqueFd> ConnectDataConnection(const sockaddr_storage& address, const DataKey& key,
                                               const WaitLimit& limit);

// How a record waits for room in the connection.
//   kQueued: it may fill the kernel's buffers, so that records go while the receiver is not
//     reading, up to what those hold (a relay's frame, a stride link's queued frames).
//   kPaced: it leaves at most kPacedUnsentBytes unsent in them (TCP_NOTSENT_LOWAT) and
//     waits for the rest to go out. For a stream of records whose receiver reads as they
//     come (the ring's segments, sent by a thread of their own): megabytes queued in the
//     sender only delay each record behind them (measured across hosts: a 64 MiB
//     all-reduce at 2.5 Gbit/s 2% faster, a 16 MiB one at 1 Gbit/s 1%).
// A queued record after paced ones has the whole buffers again.
enum class RecordPacing { kQueued, kPaced };
inline constexpr int kPacedUnsentBytes = 256 << 10;

// The sending end. Thread-safety: one thread sends at a time; Close and broken from any.
class RecordSender {
 public:
  // `sealer`: seals every record (the receiver opens them with the same key); null: they
  // go in the clear.
  explicit RecordSender(UniqueFd fd, std::unique_ptr<RecordSealer> sealer = nullptr)
      : fd_(std::move(fd)), sealer_(std::move(sealer)) {}
  ~RecordSender() { Close(); }

  // Writes one record, the concatenation of `pieces` (1 byte to 4 GiB - 1), waiting
  // within `limit` while the connection is full — `gone()` and the limit are looked at
  // while it waits: Unavailable once `gone()` says the receiver is gone — or fails
  // Unavailable when the connection does. After any of these the connection is broken
  // (part of the record may have gone) and every later Send fails; a record of no bytes
  // is refused (InvalidArgument) before anything is sent, which breaks nothing.
  absl::Status Send(absl::Span<const absl::Span<const std::byte>> pieces, const WaitLimit& limit,
                    const std::function<bool()>& gone,
                    RecordPacing pacing = RecordPacing::kQueued);
  bool broken() const { return broken_.load(); }
  bool sealed() const { return sealer_ != nullptr; }
  // Shuts the connection down: its receiver sees it end; a Send in progress fails.
  void Close();

 private:
  const UniqueFd fd_;
  const std::unique_ptr<RecordSealer> sealer_;
  // Sets the connection's pacing if it is not `pacing` already.
  void Pace(RecordPacing pacing);

  std::vector<std::byte> sealed_;  // the sealed record being sent, its storage kept
  RecordPacing pacing_ = RecordPacing::kQueued;  // the socket's, as set last
  std::atomic<bool> broken_{false};
};

// The receiving end reads records with IncomingRecords (incoming_records.h).

}  // namespace ringsync
