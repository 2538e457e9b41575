// ringsync-chaos-check: the chaos tests' checks (outcome_log.h) over trainer logs from
// anywhere, e.g. trainers run on hosts in network namespaces. Arguments: one log file per
// trainer, in slot order (the trainer's --index). Prints the verdict; exits 1 when a
// result was wrong or partial or a failure named no rank or worker, 2 on a missing file.
#include <cstdio>
#include <fstream>
#include <sstream>
#include <vector>

#include "tests/chaos/outcome_log.h"

int main(int argc, char** argv) {
  std::vector<ringsync::chaos::TrainerLog> logs;
  for (int i = 1; i < argc; ++i) {
    std::ifstream in(argv[i]);
    if (!in) {
      std::fprintf(stderr, "cannot read %s\n", argv[i]);
      return 2;
    }
    std::stringstream text;
    text << in.rdbuf();
    logs.push_back(ringsync::chaos::ParseTrainerLog(i - 1, text.str()));
  }
  const ringsync::chaos::Verdict verdict = ringsync::chaos::CheckOutcomes(logs);
  std::printf("%s\n", verdict.Summary().c_str());
  return verdict.wrong == 0 && verdict.partial == 0 && verdict.unnamed_failures == 0 ? 0 : 1;
}
