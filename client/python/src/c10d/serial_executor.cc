#include "client/python/src/c10d/serial_executor.h"

#include <utility>

namespace ringsync::python {

SerialExecutor::SerialExecutor() : thread_([this] { Run(); }) {}

SerialExecutor::~SerialExecutor() { Stop(); }

void SerialExecutor::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

void SerialExecutor::Post(std::function<void()> job) {
  absl::MutexLock lock(&mu_);
  jobs_.push_back(std::move(job));
}

void SerialExecutor::Run() {
  for (;;) {
    std::function<void()> job;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](SerialExecutor* self) ABSL_EXCLUSIVE_LOCKS_REQUIRED(self->mu_) {
            return self->stopping_ || !self->jobs_.empty();
          },
          this));
      if (jobs_.empty()) return;  // stopping, and everything posted has run
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    job();
  }
}

}  // namespace ringsync::python
