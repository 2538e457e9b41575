// libFuzzer's one-time set-up, linked into every fuzz target: protobuf logs an ERROR
// line for each string field that is not UTF-8, which a fuzzer produces millions of
// times; the lines would drown libFuzzer's own output and slow every run down.
#include <string>

#include "google/protobuf/stubs/logging.h"

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  google::protobuf::SetLogHandler(
      [](google::protobuf::LogLevel, const char*, int, const std::string&) {});
  return 0;
}
