// StopSignals: SIGINT and SIGTERM taken synchronously, so no work runs in a signal
// handler. Constructing one blocks both signals in the calling thread, and every thread
// started afterwards (gRPC's included) inherits the mask: construct it first in main().
#pragma once

#include <signal.h>

namespace ringsync {

class StopSignals {
 public:
  StopSignals();
  // Waits for SIGINT or SIGTERM; returns which.
  int Await() const;

 private:
  sigset_t signals_;
};

}  // namespace ringsync
