#include "daemon/transport/grpc/data_feeder.h"

#include <sys/socket.h>

#include <vector>

#include "absl/strings/str_cat.h"
#include "daemon/transport/grpc/frame_codec.h"
#include "daemon/transport/tcp/data_connection.h"

namespace ringsync {

DataFeeder::DataFeeder(UniqueFd connection, DataFeederTarget target)
    : connection_(std::move(connection)), target_(std::move(target)) {}

DataFeeder::~DataFeeder() {
  Stop();
  if (!thread_.joinable()) return;
  // The last owner may be the thread itself (it ended the stream, which dropped it).
  if (thread_.get_id() == std::this_thread::get_id()) {
    thread_.detach();
  } else {
    thread_.join();
  }
}

void DataFeeder::Start() {
  absl::MutexLock lock(&mu_);
  if (thread_.joinable() || stopped_) return;
  thread_ = std::thread([this] { Read(); });
}

void DataFeeder::Resume() {
  absl::MutexLock lock(&mu_);
  ++resumes_;
}

void DataFeeder::Stop() {
  absl::MutexLock lock(&mu_);
  if (stopped_) return;
  stopped_ = true;
  ::shutdown(connection_.get(), SHUT_RDWR);  // wakes a recv in progress
}

void DataFeeder::Read() {
  bool first = true;
  while (true) {
    absl::StatusOr<ReceivedRecord> record = ReadRecord(connection_.get(), target_.max_record_bytes);
    {
      absl::MutexLock lock(&mu_);
      if (stopped_) return;  // whoever stopped it ended the stream
    }
    const absl::Status read = record.status();
    if (absl::IsOutOfRange(read)) {
      Fail(absl::UnavailableError(absl::StrCat("the data connection from ", target_.sender, " closed")),
           /*clean_close=*/true);
      return;
    }
    if (!read.ok()) {
      Fail(read, false);
      return;
    }
    absl::StatusOr<DecodedMessage> message = DecodeRecord(std::move(record->bytes), record->size);
    if (!message.ok()) {
      Fail(message.status(), false);
      return;
    }
    if (message->is_hello || message->shm.has_value()) {
      Fail(absl::InvalidArgumentError(message->is_hello
                                          ? "a hello on the data connection"
                                          : "a frame names a shared-memory slot on a data connection"),
           false);
      return;
    }
    uint64_t resumes = 0;
    {
      absl::MutexLock lock(&mu_);
      resumes = resumes_;
    }
    absl::StatusOr<bool> room = target_.inbox->Push(std::move(message->frame), std::exchange(first, false));
    if (!room.ok()) {
      Fail(room.status(), false);
      return;
    }
    if (!*room) {
      // Full: read again once the inbox made room (a Resume since the push counts).
      absl::MutexLock lock(&mu_);
      auto resumed = [this, resumes]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
        return stopped_ || resumes_ != resumes;
      };
      mu_.Await(absl::Condition(&resumed));
      if (stopped_) return;
    }
  }
}

void DataFeeder::Fail(const absl::Status& why, bool clean_close) {
  const absl::Status broke =
      clean_close ? why
                  : absl::Status(why.code(), absl::StrCat("the data connection from ", target_.sender,
                                                          " broke: ", why.message()));
  target_.inbox->Detach(target_.feeder, broke);
  if (std::shared_ptr<InboxFeeder> stream = target_.stream.lock(); stream != nullptr) {
    stream->EndStream(clean_close ? absl::OkStatus() : broke);
  }
}

}  // namespace ringsync
