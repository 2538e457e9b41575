// The order gRPC keeps between a reactor's creator and its reactions, and the order the
// worker keeps between a request and its answer, told to ThreadSanitizer.
//
// gRPC runs a reactor's reactions (OnReadDone, OnWriteDone, OnDone) on its own threads,
// after the code that created the reactor and started its call. That order is kept inside
// gRPC's core, which a ThreadSanitizer build cannot see (Debian's gRPC is not
// instrumented), so TSan would report the reactor's own construction as racing with its
// reactions. These two calls state the order; outside TSan builds they are empty.
#pragma once

#if defined(__SANITIZE_THREAD__)
extern "C" void __tsan_acquire(void* addr);
extern "C" void __tsan_release(void* addr);
#endif

namespace ringsync {

// Call once the reactor is set up, before the operation that lets gRPC run reactions.
inline void HandToGrpc([[maybe_unused]] void* reactor) {
#if defined(__SANITIZE_THREAD__)
  __tsan_release(reactor);
#endif
}

// Call first in every reaction.
inline void InReaction([[maybe_unused]] void* reactor) {
#if defined(__SANITIZE_THREAD__)
  __tsan_acquire(reactor);
#endif
}

// The SDK's call channel: the worker answers a request only after it has read it, so an
// answer follows everything the caller did before sending the request. That order runs
// through the worker process, which ThreadSanitizer cannot see. Call SentToOtherProcess
// before publishing a request into shared memory, ReceivedFromOtherProcess after taking an
// answer, both with the same channel.
inline void SentToOtherProcess([[maybe_unused]] void* channel) {
#if defined(__SANITIZE_THREAD__)
  __tsan_release(channel);
#endif
}

inline void ReceivedFromOtherProcess([[maybe_unused]] void* channel) {
#if defined(__SANITIZE_THREAD__)
  __tsan_acquire(channel);
#endif
}

}  // namespace ringsync
