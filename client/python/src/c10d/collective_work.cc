#include "client/python/src/c10d/collective_work.h"

#include <exception>
#include <stdexcept>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"

namespace ringsync::python {

CollectiveWork::CollectiveWork(int rank, c10d::OpType type, const char* what,
                               std::vector<at::Tensor> outputs, std::vector<at::Tensor> keep_alive,
                               CollectiveHandle handle, std::function<void()> on_success)
    : c10d::Work(rank, type),
      what_(what),
      outputs_(std::move(outputs)),
      keep_alive_(std::move(keep_alive)),
      handle_(std::move(handle)),
      on_success_(std::move(on_success)),
      future_(c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()))) {}

void CollectiveWork::Complete(const std::function<void()>& release) {
  absl::Status status = handle_.Wait();
  std::exception_ptr error;
  if (status.ok() && on_success_) {
    try {
      on_success_();
    } catch (const std::exception& e) {
      status = absl::InternalError(e.what());
    }
  }
  if (!status.ok()) {
    // A plain runtime_error: Python sees RuntimeError with the worker's message, which
    // names the rank, generation and collective.
    error = std::make_exception_ptr(std::runtime_error(
        absl::StrCat("ringsync ", what_, " failed: ", status.message())));
  }
  keep_alive_.clear();
  if (release) release();
  finish(error);
  if (error) {
    future_->setError(error);
  } else {
    future_->markCompleted(c10::IValue(outputs_));
  }
}

}  // namespace ringsync::python
