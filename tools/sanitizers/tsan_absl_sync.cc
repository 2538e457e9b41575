// ThreadSanitizer builds only: teaches TSan what Debian's Abseil synchronization does.
//
// Debian's libabsl_synchronization is not built with TSan, so absl::Mutex, CondVar and
// Notification synchronize through atomics and futexes TSan never sees, and every field
// guarded by an absl::Mutex would be reported as a race. This file defines their entry
// points in the test executable itself — the dynamic linker prefers them to the
// library's — and each calls the library's own function (dlsym(RTLD_NEXT)) wrapped in
// TSan's mutex annotations.
//
// Two details make the annotations exact:
//  * Only calls from this executable's (instrumented) code are annotated. gRPC's own
//    locks are absl::Mutex too and also reach these wrappers from its uninstrumented
//    libraries, whose accesses TSan ignores anyway.
//  * The library's work runs with TSan's recording off: absl evaluates a waiter's
//    Condition on whichever thread unlocks, which is ordered by the real lock but not by
//    the annotated one.
//
// Linked into every executable of a RINGSYNC_SANITIZE=thread build, never elsewhere.
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"

extern "C" {
void __tsan_mutex_create(void* addr, unsigned flags);
void __tsan_mutex_destroy(void* addr, unsigned flags);
void __tsan_mutex_pre_lock(void* addr, unsigned flags);
void __tsan_mutex_post_lock(void* addr, unsigned flags, int recursion);
int __tsan_mutex_pre_unlock(void* addr, unsigned flags);
void __tsan_mutex_post_unlock(void* addr, unsigned flags);
void __tsan_acquire(void* addr);
void __tsan_release(void* addr);
void __tsan_ignore_thread_begin();
void __tsan_ignore_thread_end();
}

namespace {

constexpr unsigned kReadLock = 1 << 3;  // __tsan_mutex_read_lock
constexpr unsigned kTryLock = 1 << 4;   // __tsan_mutex_try_lock
constexpr unsigned kTryLockFailed = 1 << 5;

// The library's definition of the symbol `mangled`.
template <typename Fn>
Fn Real(const char* mangled) {
  void* fn = dlsym(RTLD_NEXT, mangled);
  if (fn == nullptr) {
    std::fprintf(stderr, "tsan_absl_sync: %s not found in the Abseil library\n", mangled);
    std::abort();
  }
  return reinterpret_cast<Fn>(fn);
}

// Whether `caller` is code of this executable.
bool FromInstrumentedCode(const void* caller) {
  static const void* const executable_base = [] {
    Dl_info self{};
    dladdr(reinterpret_cast<const void*>(&FromInstrumentedCode), &self);
    return self.dli_fbase;
  }();
  Dl_info info{};
  return dladdr(caller, &info) != 0 && info.dli_fbase == executable_base;
}

// Set while this thread runs the library's code: the library calls its own entry points
// too (AwaitWithTimeout tail-calls AwaitWithDeadline), and those inner calls must not be
// annotated a second time.
thread_local int in_library = 0;  // depth: the library's calls nest

// Runs the library's code unrecorded.
template <typename F>
auto Unrecorded(F&& f) {
  __tsan_ignore_thread_begin();
  ++in_library;
  struct End {
    ~End() {
      --in_library;
      __tsan_ignore_thread_end();
    }
  } end;
  return f();
}

void Acquire(void* mu, unsigned flags = 0) {
  __tsan_mutex_pre_lock(mu, flags);
  __tsan_mutex_post_lock(mu, flags, 0);
}
void Release(void* mu, unsigned flags = 0) {
  __tsan_mutex_pre_unlock(mu, flags);
  __tsan_mutex_post_unlock(mu, flags);
}

// A call that holds `mu` before and after but releases it while it waits (Await, CondVar).
template <typename F>
auto WaitReleasing(void* mu, bool annotate, F&& wait) {
  if (!annotate) return Unrecorded(wait);
  Release(mu);
  auto result = Unrecorded(wait);
  Acquire(mu);
  return result;
}

}  // namespace

// The mangled names carry Debian's inline namespace, spelled out from the symbols the
// library exports.
#define RINGSYNC_ABSL "_ZN4absl7debian3"
#define CALLER_IS_OURS (in_library == 0 && FromInstrumentedCode(__builtin_return_address(0)))

void absl::Mutex::Lock() {
  static auto real = Real<void (*)(Mutex*)>(RINGSYNC_ABSL "5Mutex4LockEv");
  if (!CALLER_IS_OURS) return Unrecorded([&] { return real(this); });
  __tsan_mutex_pre_lock(this, 0);
  Unrecorded([&] { real(this); });
  __tsan_mutex_post_lock(this, 0, 0);
}

void absl::Mutex::Unlock() {
  static auto real = Real<void (*)(Mutex*)>(RINGSYNC_ABSL "5Mutex6UnlockEv");
  if (!CALLER_IS_OURS) return Unrecorded([&] { return real(this); });
  __tsan_mutex_pre_unlock(this, 0);
  Unrecorded([&] { real(this); });
  __tsan_mutex_post_unlock(this, 0);
}

void absl::Mutex::ReaderLock() {
  static auto real = Real<void (*)(Mutex*)>(RINGSYNC_ABSL "5Mutex10ReaderLockEv");
  if (!CALLER_IS_OURS) return Unrecorded([&] { return real(this); });
  __tsan_mutex_pre_lock(this, kReadLock);
  Unrecorded([&] { real(this); });
  __tsan_mutex_post_lock(this, kReadLock, 0);
}

void absl::Mutex::ReaderUnlock() {
  static auto real = Real<void (*)(Mutex*)>(RINGSYNC_ABSL "5Mutex12ReaderUnlockEv");
  if (!CALLER_IS_OURS) return Unrecorded([&] { return real(this); });
  __tsan_mutex_pre_unlock(this, kReadLock);
  Unrecorded([&] { real(this); });
  __tsan_mutex_post_unlock(this, kReadLock);
}

bool absl::Mutex::TryLock() {
  static auto real = Real<bool (*)(Mutex*)>(RINGSYNC_ABSL "5Mutex7TryLockEv");
  if (!CALLER_IS_OURS) return Unrecorded([&] { return real(this); });
  __tsan_mutex_pre_lock(this, kTryLock);
  const bool locked = Unrecorded([&] { return real(this); });
  __tsan_mutex_post_lock(this, locked ? kTryLock : kTryLock | kTryLockFailed, 0);
  return locked;
}

void absl::Mutex::Await(const Condition& cond) {
  static auto real =
      Real<void (*)(Mutex*, const Condition&)>(RINGSYNC_ABSL "5Mutex5AwaitERKNS0_9ConditionE");
  WaitReleasing(this, CALLER_IS_OURS, [&] {
    real(this, cond);
    return true;
  });
}

bool absl::Mutex::AwaitWithTimeout(const Condition& cond, absl::Duration timeout) {
  static auto real = Real<bool (*)(Mutex*, const Condition&, absl::Duration)>(
      RINGSYNC_ABSL "5Mutex16AwaitWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  return WaitReleasing(this, CALLER_IS_OURS, [&] { return real(this, cond, timeout); });
}

bool absl::Mutex::AwaitWithDeadline(const Condition& cond, absl::Time deadline) {
  static auto real = Real<bool (*)(Mutex*, const Condition&, absl::Time)>(
      RINGSYNC_ABSL "5Mutex17AwaitWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  return WaitReleasing(this, CALLER_IS_OURS, [&] { return real(this, cond, deadline); });
}

absl::Mutex::~Mutex() {
  static auto real = Real<void (*)(Mutex*)>(RINGSYNC_ABSL "5MutexD1Ev");
  if (CALLER_IS_OURS) __tsan_mutex_destroy(this, 0);
  Unrecorded([&] { real(this); });
}

// gRPC's header code (grpc::internal::CondVar, inlined into our executables) waits on
// absl::CondVar with an absl::Mutex it locked through the wrappers above.
void absl::CondVar::Wait(Mutex* mu) {
  static auto real = Real<void (*)(CondVar*, Mutex*)>(RINGSYNC_ABSL "7CondVar4WaitEPNS0_5MutexE");
  WaitReleasing(mu, CALLER_IS_OURS, [&] {
    real(this, mu);
    return true;
  });
}

bool absl::CondVar::WaitWithTimeout(Mutex* mu, absl::Duration timeout) {
  static auto real = Real<bool (*)(CondVar*, Mutex*, absl::Duration)>(
      RINGSYNC_ABSL "7CondVar15WaitWithTimeoutEPNS0_5MutexENS0_8DurationE");
  return WaitReleasing(mu, CALLER_IS_OURS, [&] { return real(this, mu, timeout); });
}

bool absl::CondVar::WaitWithDeadline(Mutex* mu, absl::Time deadline) {
  static auto real = Real<bool (*)(CondVar*, Mutex*, absl::Time)>(
      RINGSYNC_ABSL "7CondVar16WaitWithDeadlineEPNS0_5MutexENS0_4TimeE");
  return WaitReleasing(mu, CALLER_IS_OURS, [&] { return real(this, mu, deadline); });
}

void absl::Notification::Notify() {
  static auto real = Real<void (*)(Notification*)>(RINGSYNC_ABSL "12Notification6NotifyEv");
  if (!CALLER_IS_OURS) return Unrecorded([&] { return real(this); });
  __tsan_release(this);
  Unrecorded([&] { real(this); });
}

void absl::Notification::WaitForNotification() const {
  static auto real =
      Real<void (*)(const Notification*)>("_ZNK4absl7debian312Notification19WaitForNotificationEv");
  Unrecorded([&] { real(this); });
  __tsan_acquire(const_cast<Notification*>(this));
}

bool absl::Notification::WaitForNotificationWithTimeout(absl::Duration timeout) const {
  static auto real = Real<bool (*)(const Notification*, absl::Duration)>(
      "_ZNK4absl7debian312Notification30WaitForNotificationWithTimeoutENS0_8DurationE");
  const bool notified = Unrecorded([&] { return real(this, timeout); });
  if (notified) __tsan_acquire(const_cast<Notification*>(this));
  return notified;
}
