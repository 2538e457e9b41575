#include "ringsync/registered_buffer.h"

#include <optional>

#include "absl/strings/cord.h"
#include "client/src/registered_memory.h"
#include "client/src/registered_buffer_state.h"

namespace ringsync {

RegisteredBuffer::RegisteredBuffer(std::shared_ptr<internal::RegisteredMemory> memory)
    : memory_(std::move(memory)) {}

RegisteredBuffer::~RegisteredBuffer() = default;

void* RegisteredBuffer::data() const { return memory_ != nullptr ? memory_->data() : nullptr; }

size_t RegisteredBuffer::size_bytes() const { return memory_ != nullptr ? memory_->size() : 0; }

bool RegisteredBufferUntouched(const absl::Status& status) {
  if (status.ok()) return false;
  const auto state = status.GetPayload(internal::kRegisteredBufferPayloadUrl);
  return !state.has_value() || *state != internal::kRegisteredBufferUnspecified;
}

}  // namespace ringsync
