#include "daemon/transport/grpc/posted_write.h"

#include <utility>

namespace ringsync {

void PostedWrite::Written(const absl::Status& outcome) {
  std::optional<Completion> completion;
  {
    absl::MutexLock lock(&mu_);
    if (outcome_.has_value()) return;
    outcome_ = outcome;
    completion = TakeCompletion();
  }
  Run(std::move(completion));
}

void PostedWrite::Released() {
  std::optional<Completion> completion;
  {
    absl::MutexLock lock(&mu_);
    released_ = true;
    completion = TakeCompletion();
  }
  Run(std::move(completion));
}

bool PostedWrite::finished() const {
  absl::MutexLock lock(&mu_);
  return finished_;
}

std::optional<PostedWrite::Completion> PostedWrite::TakeCompletion() {
  if (finished_ || !released_ || !outcome_.has_value()) return std::nullopt;
  finished_ = true;
  return Completion{std::move(done_), *outcome_};
}

void PostedWrite::Run(std::optional<Completion> completion) {
  if (completion.has_value()) completion->done(completion->outcome);
}

}  // namespace ringsync
