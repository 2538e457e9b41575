// SweepDeadClientFiles: the shared-memory tensors that training processes left behind
// when they died together with their worker (both SIGKILLed: nobody was left to remove
// the files, and a restarted worker never hears of the dead client). A worker sweeps its
// --shm_dir once at start.
//
// A file is removed only when all of these hold, so that nothing of a live process or of
// another user is ever touched:
//  * its name is exactly the SDK's, "ringsync-<pid>-<n>-<8 hex digits>" (see the SDK's
//    shared_memory_region.cc), with a pid above 0;
//  * it is a regular file (not a link), owned by `uid` (the worker's own user);
//  * `alive(pid)` is false: no process with that pid exists (the SDK and its worker share
//    a pid namespace: the worker learns its client's pid from the unix socket).
#pragma once

#include <sys/types.h>

#include <functional>
#include <string>
#include <vector>

namespace ringsync {

// Whether a process with `pid` exists here (kill(pid, 0) does not fail with ESRCH).
bool ProcessExists(pid_t pid);

// Removes the files above from `directory`; returns their paths. A directory that cannot
// be read sweeps nothing.
std::vector<std::string> SweepDeadClientFiles(
    const std::string& directory, uid_t uid,
    const std::function<bool(pid_t)>& alive = ProcessExists);

}  // namespace ringsync
