// RawWorkerClient: a client of a worker's ringsync.v1.Worker service that speaks the
// protocol directly, without the SDK — a rogue process on the host in the security
// tests, or a training process that does what the SDK never would (gaps in its
// client_sequence, files it truncates).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "ringsync/v1/worker.grpc.pb.h"
#include "wire/attach_token.h"

namespace ringsync::testing {

class RawWorkerClient {
 public:
  explicit RawWorkerClient(const std::string& target)
      : stub_(v1::Worker::NewStub(
            grpc::CreateChannel(target, grpc::InsecureChannelCredentials()))) {}
  ~RawWorkerClient() {
    if (reader_ != nullptr) {
      attach_context_.TryCancel();
      reader_->Finish().ok();
    }
  }

  // Attaches as a training process claiming `claimed_pid`; returns the worker's answer
  // (the attach token is kept for later calls).
  grpc::Status Attach(int64_t claimed_pid = 0) {
    v1::AttachRequest request;
    request.set_client_name("raw test client");
    request.set_client_pid(claimed_pid);
    reader_ = stub_->Attach(&attach_context_, request);
    v1::WorkerEvent event;
    if (reader_->Read(&event)) {
      token_ = event.attach_token();
      return grpc::Status::OK;
    }
    grpc::Status status = reader_->Finish();
    reader_.reset();
    return status;
  }
  // Ends the Attach stream (the client leaves) and waits until the worker noticed.
  void Leave() {
    attach_context_.TryCancel();
    if (reader_ != nullptr) reader_->Finish().ok();
    reader_.reset();
  }

  const std::string& token() const { return token_; }
  void set_token(std::string token) { token_ = std::move(token); }

  // A blocking AllReduce of `request`, carrying the current token (if any).
  grpc::Status AllReduce(const v1::CollectiveRequest& request,
                         v1::CollectiveResponse* response = nullptr) {
    grpc::ClientContext context;
    if (!token_.empty()) context.AddMetadata(kAttachTokenMetadata, token_);
    v1::CollectiveResponse ignored;
    return stub_->AllReduce(&context, request, response != nullptr ? response : &ignored);
  }
  grpc::Status Detach() {
    grpc::ClientContext context;
    if (!token_.empty()) context.AddMetadata(kAttachTokenMetadata, token_);
    v1::DetachResponse response;
    return stub_->Detach(&context, v1::DetachRequest(), &response);
  }

 private:
  std::unique_ptr<v1::Worker::Stub> stub_;
  grpc::ClientContext attach_context_;
  std::unique_ptr<grpc::ClientReader<v1::WorkerEvent>> reader_;
  std::string token_;
};

// A float32 SUM all-reduce request named `name` for client_sequence `sequence`.
inline v1::CollectiveRequest SumRequest(const std::string& name, uint64_t sequence,
                                        uint64_t count) {
  v1::CollectiveRequest request;
  request.mutable_spec()->set_name(name);
  request.mutable_spec()->set_kind(v1::COLLECTIVE_KIND_ALL_REDUCE);
  request.mutable_spec()->set_dtype(v1::DTYPE_FLOAT32);
  request.mutable_spec()->set_count(count);
  request.mutable_spec()->set_op(v1::REDUCE_OP_SUM);
  request.set_client_sequence(sequence);
  return request;
}

// The same, its `values` inline.
inline v1::CollectiveRequest InlineSum(const std::string& name, uint64_t sequence,
                                       const std::vector<float>& values) {
  v1::CollectiveRequest request = SumRequest(name, sequence, values.size());
  request.set_inline_data(values.data(), values.size() * sizeof(float));
  return request;
}

// The same, naming [offset, offset + size) of a shared file.
inline v1::CollectiveRequest SharedSum(const std::string& name, uint64_t sequence,
                                       uint64_t count, const std::string& path,
                                       uint64_t offset = 0, bool reuse = true) {
  v1::CollectiveRequest request = SumRequest(name, sequence, count);
  request.mutable_shared()->set_path(path);
  request.mutable_shared()->set_offset(offset);
  request.mutable_shared()->set_size_bytes(count * sizeof(float));
  request.mutable_shared()->set_reuse(reuse);
  return request;
}

}  // namespace ringsync::testing
