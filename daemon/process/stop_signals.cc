#include "daemon/process/stop_signals.h"

#include <pthread.h>

namespace ringsync {

StopSignals::StopSignals() {
  sigemptyset(&signals_);
  sigaddset(&signals_, SIGINT);
  sigaddset(&signals_, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals_, nullptr);
}

int StopSignals::Await() const {
  int signal_number = 0;
  while (sigwait(&signals_, &signal_number) != 0) {
  }
  return signal_number;
}

}  // namespace ringsync
