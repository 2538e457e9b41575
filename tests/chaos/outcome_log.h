// What the chaos trainers logged (chaos_trainer.cc's lines), read back, and the checks
// every chaos scenario makes over all trainers of a job at its end:
//   * no wrong result (a trainer checks each result it got and logs "wrong"),
//   * no partial outcome: an OK result names, per participant, which of its calls it was;
//     each of those calls must have ended OK with the same participants. The exceptions
//     are a rank that lost its own worker (it is not a survivor) and a failure the SDK
//     marks in doubt (the one documented case), both counted apart,
//   * every failure names a rank or a worker.
//
// Thread-safety: pure functions over strings.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace ringsync::chaos {

struct CallOutcome {
  int64_t k = 0;  // the trainer's call number, from 1
  std::string name;
  bool ok = false;
  std::string code;  // failed: the absl status code's name
  bool membership_changed = false;
  bool in_doubt = false;
  bool lost_worker = false;
  int rank = -1;
  int world = 0;
  double ms = 0;
  int64_t t_us = 0;  // when it returned, Unix microseconds
  std::map<int, int64_t> slots;  // ok: participant trainer -> its call number
  std::string message;
};

struct TrainerLog {
  int trainer = 0;
  std::vector<CallOutcome> calls;  // in call order
  std::vector<std::string> wrong;  // the "wrong" lines
  bool done = false;               // "done" seen: every step ran
  int64_t connects = 0;
  std::vector<std::string> connect_lines;  // "lost_worker" and "connected" lines: when, how long
  int64_t ok_steps = 0;            // successful "step/" calls
  // calls by number, for the cross checks
  const CallOutcome* Find(int64_t k) const;
};

TrainerLog ParseTrainerLog(int trainer, const std::string& text);
// Adds `lines` (whole lines only) to `log`: a log read as it grows.
void AppendTrainerLines(TrainerLog& log, absl::string_view lines);

struct Verdict {
  int64_t calls = 0, ok = 0, failed = 0;
  int64_t wrong = 0;
  int64_t partial = 0;
  int64_t in_doubt = 0;         // failures marked in doubt whose collective ended OK elsewhere
  int64_t lost_worker = 0;      // ditto, on a rank that lost its own worker
  int64_t unnamed_failures = 0;
  int64_t membership_changed = 0;
  std::vector<std::string> problems;  // one line each (the first few of every kind)
  std::string Summary() const;
};

Verdict CheckOutcomes(const std::vector<TrainerLog>& logs);

}  // namespace ringsync::chaos
