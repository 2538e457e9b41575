// Futex waits and wakes on a word in memory shared between processes (a memfd mapping):
// the one way a same-host peer's thread sleeps until the other side changes the word.
// Shared futexes, not FUTEX_PRIVATE: the waker is usually another process.
#pragma once

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>

#include "absl/time/time.h"

namespace ringsync {

// Sleeps while `*word == expected`, at most `timeout` (spurious returns are allowed: the
// caller re-checks its condition).
inline void SharedFutexWait(std::atomic<uint32_t>* word, uint32_t expected,
                            absl::Duration timeout) {
  static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t));
  const timespec ts = absl::ToTimespec(timeout);
  ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, expected, &ts, nullptr, 0);
}

// Wakes one thread sleeping on `word`, in any process.
inline void SharedFutexWake(std::atomic<uint32_t>* word) {
  ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, 1, nullptr, nullptr, 0);
}

}  // namespace ringsync
