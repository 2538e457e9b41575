#include "daemon/http/bounded_http_server.h"

#include <sys/socket.h>
#include <unistd.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "daemon/http/deadline_stream.h"

namespace ringsync {
namespace {

constexpr size_t kMaxRequestBodyBytes = 4096;

}  // namespace

// httplib's task queue, with a thread per allowed connection: a connection runs at once
// on a free thread, or, when all are taken, is refused on the accepting thread (its
// task runs there, and process_and_close_socket sees where it runs).
class BoundedHttpServer::ConnectionSlots final : public httplib::TaskQueue {
 public:
  explicit ConnectionSlots(BoundedHttpServer& server)
      : server_(server), pool_(static_cast<size_t>(server.limits_.max_connections)) {}

  void enqueue(std::function<void()> task) override {
    if (busy_.fetch_add(1) >= server_.limits_.max_connections) {
      busy_.fetch_sub(1);
      server_.refusing_on_ = std::this_thread::get_id();
      task();  // refuses: sends 503 without waiting for the client, and closes
      server_.refusing_on_ = std::thread::id();
      return;
    }
    pool_.enqueue([this, task = std::move(task)] {
      task();
      busy_.fetch_sub(1);
    });
  }

  void shutdown() override { pool_.shutdown(); }

 private:
  BoundedHttpServer& server_;
  httplib::ThreadPool pool_;
  std::atomic<int> busy_{0};  // connections on the pool's threads
};

BoundedHttpServer::BoundedHttpServer(HttpLimits limits, RefuseFn refuse)
    : limits_(limits), refuse_(std::move(refuse)) {
  // httplib owns the queue it gets from this factory (a raw pointer is its API).
  new_task_queue = [this] { return new ConnectionSlots(*this); };
  set_keep_alive_max_count(1);
  // No page takes a body, and httplib would read one whole into memory (its default
  // bound is SIZE_MAX): a larger one is answered 413 without being read.
  set_payload_max_length(kMaxRequestBodyBytes);
}

bool BoundedHttpServer::process_and_close_socket(int sock) {
  bool served = false;
  if (refusing_on_.load() == std::this_thread::get_id()) {
    RefuseConnection(sock);
  } else {
    DeadlineStream stream(sock, SteadyDeadline(limits_.read_timeout), limits_.write_timeout);
    bool closed = false;
    served = process_request(stream, /*close_connection=*/true, closed, nullptr);
    if (stream.read_timed_out()) {
      std::string ip;
      int port = 0;
      SocketAddress(sock, /*local=*/false, ip, port);
      refuse_("http_read_timeout",
              absl::StrCat(ip, ":", port, " sent no complete request within ",
                           absl::FormatDuration(limits_.read_timeout),
                           " (--http_read_timeout); connection closed"));
    }
  }
  ::shutdown(sock, SHUT_RDWR);
  ::close(sock);
  return served;
}

void BoundedHttpServer::RefuseConnection(int sock) {
  const std::string body = absl::StrCat("too many HTTP connections (", limits_.max_connections,
                                        ", --http_max_connections); try again\n");
  const std::string response = absl::StrCat(
      "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\n"
      "Connection: close\r\nContent-Length: ",
      body.size(), "\r\n\r\n", body);
  // Never waits: a full socket buffer just loses the courtesy answer.
  (void)::send(sock, response.data(), response.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
  std::string ip;
  int port = 0;
  SocketAddress(sock, /*local=*/false, ip, port);
  refuse_("http_connection_limit",
          absl::StrCat(ip, ":", port, " refused: ", limits_.max_connections,
                       " connections open (--http_max_connections)"));
}

}  // namespace ringsync
