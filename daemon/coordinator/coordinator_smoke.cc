// coordinator_smoke: `ringsyncd coordinator` without the worker role linked in, so the
// coordinator can run as a real process before (and apart from) the full daemon.
//   coordinator_smoke --world_size=4 --listen=127.0.0.1:0 --port_file=/tmp/coord.port
#include "absl/flags/parse.h"
#include "daemon/coordinator/coordinator_main.h"

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return ringsync::RunCoordinatorMain();
}
