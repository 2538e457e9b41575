// The worker keeps the heap memory it frees, for the next collective to reuse.
//
// Why: a worker allocates tensor-sized buffers for every collective that carries data
// inline (the request it parses, the job's copy, the answer), and by default glibc hands a
// freed block of 128 KiB or more back to the kernel, and trims the heap once 128 KiB are
// free at its top. The next collective then faults the same amount of memory in afresh,
// page by page: on a VM where that costs ~11 us a page, a 512 KiB all-reduce (N=4) took
// 24 ms instead of 3 ms. Retained memory is bounded by what the worker once held at the
// same time, less the trim threshold's excess.
#pragma once

#include <cstddef>

namespace ringsync {

// Blocks below this come from the heap, and are reused, rather than being mapped and
// unmapped each (glibc's own ceiling for the setting on 64-bit).
inline constexpr size_t kHeapMmapThresholdBytes = size_t{32} << 20;
// Free memory at the top of a heap is given back to the kernel only beyond this.
inline constexpr size_t kHeapTrimThresholdBytes = size_t{128} << 20;

// Applies the two thresholds to this process's allocator (glibc's mallopt). False where the
// allocator does not take them (a sanitizer's, another libc's). Call once, at start-up,
// before threads allocate.
bool KeepFreedHeapMemory();

}  // namespace ringsync
