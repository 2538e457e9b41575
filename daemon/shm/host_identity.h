// HostIdentity: what two processes compare to learn that they can share memory — the
// same running kernel (boot id), the same IPC and pid namespaces (so a memfd one of them
// names as /proc/<pid>/fd/<n> is reachable by the other), the same network namespace,
// and the same user.
//
// Thread-safety: a plain value; Local() reads /proc each call.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>

namespace ringsync {

struct HostIdentity {
  std::string boot_id;  // /proc/sys/kernel/random/boot_id, empty when unreadable
  uint64_t ipc_namespace = 0;  // inode of /proc/self/ns/ipc, 0 when unreadable
  uint64_t pid_namespace = 0;  // inode of /proc/self/ns/pid
  // Inode of /proc/self/ns/net: workers in separate network namespaces stand for separate
  // hosts (the namespace cluster shapes their links), so they keep to their network.
  uint64_t net_namespace = 0;
  uint32_t uid = 0;

  // This process's. Fields it cannot read stay empty/0, which never matches.
  static HostIdentity Local();
  // True when both are complete and equal.
  bool SameHostAs(const HostIdentity& other) const;
};

}  // namespace ringsync
