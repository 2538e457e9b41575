// FUZZ_CHECK: a property a fuzz target asserts. It aborts (a crash libFuzzer records, with
// the input) in every build type, unlike assert(), which RelWithDebInfo compiles out.
#pragma once

#include <cstdio>
#include <cstdlib>

#define FUZZ_CHECK(condition)                                                      \
  do {                                                                             \
    if (!(condition)) {                                                            \
      std::fprintf(stderr, "%s:%d: FUZZ_CHECK failed: %s\n", __FILE__, __LINE__,   \
                   #condition);                                                    \
      std::abort();                                                                \
    }                                                                              \
  } while (false)
