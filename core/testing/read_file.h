// ReadFile for tests: the whole content of a file ("" when it cannot be opened), for
// checking what a process wrote (logs, port files, metrics dumps).
#pragma once

#include <fstream>
#include <sstream>
#include <string>

namespace ringsync {

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace ringsync
