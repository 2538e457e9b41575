#include "daemon/shm/host_identity.h"

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

#include "absl/strings/ascii.h"

namespace ringsync {
namespace {

uint64_t NamespaceInode(const char* path) {
  struct stat info {};
  return ::stat(path, &info) == 0 ? static_cast<uint64_t>(info.st_ino) : 0;
}

}  // namespace

HostIdentity HostIdentity::Local() {
  HostIdentity me;
  std::ifstream boot("/proc/sys/kernel/random/boot_id");
  std::string line;
  if (std::getline(boot, line)) me.boot_id = std::string(absl::StripAsciiWhitespace(line));
  me.ipc_namespace = NamespaceInode("/proc/self/ns/ipc");
  me.pid_namespace = NamespaceInode("/proc/self/ns/pid");
  me.net_namespace = NamespaceInode("/proc/self/ns/net");
  me.uid = static_cast<uint32_t>(::getuid());
  return me;
}

bool HostIdentity::SameHostAs(const HostIdentity& other) const {
  return !boot_id.empty() && ipc_namespace != 0 && pid_namespace != 0 && net_namespace != 0 &&
         boot_id == other.boot_id && ipc_namespace == other.ipc_namespace &&
         pid_namespace == other.pid_namespace && net_namespace == other.net_namespace &&
         uid == other.uid;
}

}  // namespace ringsync
