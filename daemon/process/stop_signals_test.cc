// StopSignals: SIGINT and SIGTERM wait for Await, in this thread and every thread
// started after it.
#include "daemon/process/stop_signals.h"

#include <pthread.h>
#include <signal.h>

#include <thread>

#include "gtest/gtest.h"

namespace ringsync {
namespace {

bool IsBlockedInThisThread(int signal_number) {
  sigset_t blocked;
  sigemptyset(&blocked);
  pthread_sigmask(SIG_BLOCK, nullptr, &blocked);
  return sigismember(&blocked, signal_number) == 1;
}

TEST(StopSignals, AwaitReturnsWhichSignalArrived) {
  const StopSignals stop_signals;
  ASSERT_EQ(pthread_kill(pthread_self(), SIGTERM), 0);
  EXPECT_EQ(stop_signals.Await(), SIGTERM);
  ASSERT_EQ(pthread_kill(pthread_self(), SIGINT), 0);
  EXPECT_EQ(stop_signals.Await(), SIGINT);
}

TEST(StopSignals, ThreadsStartedAfterwardsInheritTheBlockedSignals) {
  const StopSignals stop_signals;
  bool int_blocked = false;
  bool term_blocked = false;
  std::thread later([&] {
    int_blocked = IsBlockedInThisThread(SIGINT);
    term_blocked = IsBlockedInThisThread(SIGTERM);
  });
  later.join();
  EXPECT_TRUE(int_blocked);
  EXPECT_TRUE(term_blocked);
}

}  // namespace
}  // namespace ringsync
