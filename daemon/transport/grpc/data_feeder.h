// DataFeeder: the receiving end of a ring stream's data connection
// (daemon/transport/tcp/data_connection.h). A thread of its own reads the connection's
// records, decodes each exactly as a frame mailbox's record (DecodeRecord: the same
// checks as a gRPC message, the payload read in place), and pushes the frames into the
// stream's PeerInbox as the gRPC stream would have. While the inbox is full (Push says
// so) it stops reading, so TCP's flow control holds the sender back, until the inbox's
// ResumeReading.
//
// Failures end the stream as a malformed gRPC message does: the inbox is told the
// stream broke (naming the sender and why), and the gRPC stream is ended with the same
// status. A connection that closes cleanly ends it as a half-closed stream does.
//
// Thread-safety: all methods are safe from any thread; the destructor waits for the
// thread unless it runs on it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "daemon/transport/grpc/peer_inbox.h"
#include "daemon/transport/tcp/unique_fd.h"

namespace ringsync {

struct DataFeederTarget {
  std::shared_ptr<PeerInbox> inbox;
  // The stream the connection belongs to: the inbox knows it as its feeder (Detach names
  // it), and it is ended when the connection fails.
  const InboxFeeder* feeder = nullptr;
  std::weak_ptr<InboxFeeder> stream;
  std::string sender;  // "rank 2 (worker w2) at ipv4:198.18.0.3:40112", for messages
  uint64_t max_record_bytes = 0;
};

class DataFeeder {
 public:
  DataFeeder(UniqueFd connection, DataFeederTarget target);
  ~DataFeeder();
  DataFeeder(const DataFeeder&) = delete;
  DataFeeder& operator=(const DataFeeder&) = delete;

  // Starts reading (once).
  void Start();
  // The inbox has room again.
  void Resume();
  // Stops reading and shuts the connection down; frames not read yet are lost, as a
  // cancelled stream's are. Does not wait for the thread.
  void Stop();

 private:
  void Read();
  // Ends the stream: the inbox learns why (`why` names the sender), then the gRPC stream.
  void Fail(const absl::Status& why, bool clean_close);

  const UniqueFd connection_;
  const DataFeederTarget target_;
  absl::Mutex mu_;
  uint64_t resumes_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace ringsync
