// RingWatchReader against a real gRPC server on 127.0.0.1 that plays the coordinator's
// WatchRing: views arrive in order, reading pauses on a full queue and resumes, the
// call's end status is reported, and cancelling the context ends a call that is open.
#include "daemon/worker/ring_watch_reader.h"

#include <memory>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "ringsync/v1/coordinator.grpc.pb.h"

namespace ringsync {
namespace {

// Sends `views` views (generations 1..views), then either ends the call with `end` or,
// with `hold_open`, waits until the client cancels.
class ScriptedCoordinator final : public v1::Coordinator::Service {
 public:
  ScriptedCoordinator(int views, grpc::Status end, bool hold_open)
      : views_(views), end_(std::move(end)), hold_open_(hold_open) {}

  grpc::Status WatchRing(grpc::ServerContext* context, const v1::WatchRingRequest* request,
                         grpc::ServerWriter<v1::RingView>* writer) override {
    worker_id_ = request->worker_id();
    for (int g = 1; g <= views_; ++g) {
      v1::RingView view;
      view.set_generation(g);
      if (!writer->Write(view)) {
        if (context->IsCancelled()) saw_cancel_.Notify();
        return grpc::Status::CANCELLED;
      }
    }
    all_written_.Notify();
    if (hold_open_) {
      while (!context->IsCancelled()) absl::SleepFor(absl::Milliseconds(5));
      saw_cancel_.Notify();
      return grpc::Status::CANCELLED;
    }
    return end_;
  }

  absl::Notification all_written_;
  absl::Notification saw_cancel_;
  std::string worker_id_;

 private:
  const int views_;
  const grpc::Status end_;
  const bool hold_open_;
};

class RingWatchReaderTest : public ::testing::Test {
 protected:
  void Serve(int views, grpc::Status end = grpc::Status::OK, bool hold_open = false) {
    service_ = std::make_unique<ScriptedCoordinator>(views, std::move(end), hold_open);
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    stub_ = v1::Coordinator::NewStub(grpc::CreateChannel(absl::StrCat("127.0.0.1:", port),
                                                         grpc::InsecureChannelCredentials()));
  }
  void TearDown() override {
    if (server_ != nullptr) server_->Shutdown(absl::ToChronoTime(absl::Now() + absl::Seconds(1)));
  }
  static v1::WatchRingRequest Request() {
    v1::WatchRingRequest request;
    request.set_worker_id("w7");
    return request;
  }

  std::unique_ptr<ScriptedCoordinator> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<v1::Coordinator::Stub> stub_;
};

TEST_F(RingWatchReaderTest, GivesEveryViewInOrderThenTheStatusTheCoordinatorEndedWith) {
  Serve(3, grpc::Status(grpc::StatusCode::NOT_FOUND, "unknown session"));
  grpc::ClientContext context;
  RingWatchReader reader(*stub_, context, Request());
  for (uint64_t g = 1; g <= 3; ++g) {
    std::optional<v1::RingView> view = reader.Next();
    ASSERT_TRUE(view.has_value()) << "view " << g;
    EXPECT_EQ(view->generation(), g);
  }
  EXPECT_FALSE(reader.Next().has_value());
  EXPECT_EQ(reader.status().error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(reader.status().error_message(), "unknown session");
  EXPECT_EQ(service_->worker_id_, "w7");
}

TEST_F(RingWatchReaderTest, PausesOnAFullQueueAndResumesAsViewsAreTaken) {
  // Far more views than the queue holds, none taken until the coordinator sent them all
  // (gRPC's flow-control window holds what the paused reader has not read).
  const int views = 5 * static_cast<int>(RingWatchReader::kMaxQueuedViews);
  Serve(views);
  grpc::ClientContext context;
  RingWatchReader reader(*stub_, context, Request());
  ASSERT_TRUE(service_->all_written_.WaitForNotificationWithTimeout(absl::Seconds(10)));
  for (int g = 1; g <= views; ++g) {
    std::optional<v1::RingView> view = reader.Next();
    ASSERT_TRUE(view.has_value()) << "view " << g;
    EXPECT_EQ(view->generation(), static_cast<uint64_t>(g));
  }
  EXPECT_FALSE(reader.Next().has_value());
  EXPECT_TRUE(reader.status().ok()) << reader.status().error_message();
}

TEST_F(RingWatchReaderTest, CancellingTheContextEndsAnOpenCall) {
  Serve(1, grpc::Status::OK, /*hold_open=*/true);
  grpc::ClientContext context;
  RingWatchReader reader(*stub_, context, Request());
  ASSERT_TRUE(reader.Next().has_value());
  context.TryCancel();
  EXPECT_FALSE(reader.Next().has_value());
  EXPECT_EQ(reader.status().error_code(), grpc::StatusCode::CANCELLED);
}

TEST_F(RingWatchReaderTest, DestroyingAReaderWithViewsLeftUnreadEndsTheCall) {
  Serve(3 * static_cast<int>(RingWatchReader::kMaxQueuedViews), grpc::Status::OK,
        /*hold_open=*/true);
  grpc::ClientContext context;
  {
    RingWatchReader reader(*stub_, context, Request());
    ASSERT_TRUE(reader.Next().has_value());
  }  // paused with a full queue, the call open: the destructor ends it and returns
  EXPECT_TRUE(service_->saw_cancel_.WaitForNotificationWithTimeout(absl::Seconds(10)));
}

}  // namespace
}  // namespace ringsync
