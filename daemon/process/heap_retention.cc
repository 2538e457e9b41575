#include "daemon/process/heap_retention.h"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace ringsync {

bool KeepFreedHeapMemory() {
#if defined(__GLIBC__)
  return mallopt(M_MMAP_THRESHOLD, static_cast<int>(kHeapMmapThresholdBytes)) == 1 &&
         mallopt(M_TRIM_THRESHOLD, static_cast<int>(kHeapTrimThresholdBytes)) == 1;
#else
  return false;
#endif
}

}  // namespace ringsync
