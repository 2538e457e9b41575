// DeadlineStream: one accepted HTTP connection as cpp-httplib's Stream, where reading the
// request has one deadline for the whole request, not a timeout per read. httplib's own
// stream waits read_timeout for each read, so a client that trickles a byte every few
// seconds (slowloris) would hold its thread for as long as it likes.
//
// Writing the response has a deadline of its own, counted from the first write.
//
// Thread-safety: one connection, one thread.
#pragma once

#include <sys/types.h>

#include <array>
#include <string>

#include "absl/time/time.h"
#include "core/sync/steady_deadline.h"
#include "httplib.h"

namespace ringsync {

class DeadlineStream final : public httplib::Stream {
 public:
  // Does not own `sock`. Reading must be done by `read_deadline`; writing, once begun,
  // within `write_timeout`.
  DeadlineStream(int sock, SteadyDeadline read_deadline, absl::Duration write_timeout);

  // Whether a read failed because the read deadline passed.
  bool read_timed_out() const { return read_timed_out_; }

  bool is_readable() const override;
  bool is_writable() const override;
  ssize_t read(char* ptr, size_t size) override;
  ssize_t write(const char* ptr, size_t size) override;
  void get_remote_ip_and_port(std::string& ip, int& port) const override;
  void get_local_ip_and_port(std::string& ip, int& port) const override;
  int socket() const override { return sock_; }

 private:
  // Waits until `events` (POLLIN or POLLOUT) are possible or `deadline` passes.
  bool WaitFor(short events, SteadyDeadline deadline) const;

  const int sock_;
  const SteadyDeadline read_deadline_;
  const absl::Duration write_timeout_;
  SteadyDeadline write_deadline_;  // never until the first write sets it
  bool read_timed_out_ = false;
  // httplib reads a request line and headers a byte at a time: one recv fills this.
  std::array<char, 4096> buffer_;
  size_t buffered_begin_ = 0;
  size_t buffered_end_ = 0;
};

// The numeric address of `sock`'s peer (`local`: its own) as "IP" and port.
void SocketAddress(int sock, bool local, std::string& ip, int& port);

}  // namespace ringsync
