#include "tests/chaos/outcome_log.h"

#include <algorithm>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace ringsync::chaos {
namespace {

constexpr size_t kProblemsKept = 20;

// "key=value" fields up to " msg=", which takes the rest of the line.
std::map<std::string, std::string> Fields(absl::string_view line) {
  std::map<std::string, std::string> fields;
  const size_t msg = line.find(" msg=");
  if (msg != absl::string_view::npos) {
    fields["msg"] = std::string(line.substr(msg + 5));
    line = line.substr(0, msg);
  }
  for (absl::string_view part : absl::StrSplit(line, ' ', absl::SkipEmpty())) {
    const size_t eq = part.find('=');
    if (eq != absl::string_view::npos) {
      fields[std::string(part.substr(0, eq))] = std::string(part.substr(eq + 1));
    }
  }
  return fields;
}

int64_t Int(const std::map<std::string, std::string>& f, const std::string& key) {
  int64_t v = 0;
  auto it = f.find(key);
  if (it != f.end() && absl::SimpleAtoi(it->second, &v)) return v;
  return 0;
}

CallOutcome ParseCall(const std::map<std::string, std::string>& f) {
  CallOutcome call;
  call.k = Int(f, "k");
  if (auto it = f.find("name"); it != f.end()) call.name = it->second;
  call.ok = f.count("status") && f.at("status") == "ok";
  if (auto it = f.find("code"); it != f.end()) call.code = it->second;
  call.membership_changed = Int(f, "membership_changed") != 0;
  call.in_doubt = Int(f, "in_doubt") != 0;
  call.lost_worker = Int(f, "lost_worker") != 0;
  call.rank = static_cast<int>(Int(f, "rank"));
  call.world = static_cast<int>(Int(f, "world"));
  if (auto it = f.find("ms"); it != f.end()) absl::SimpleAtod(it->second, &call.ms);
  call.t_us = Int(f, "t_us");
  if (auto it = f.find("msg"); it != f.end()) call.message = it->second;
  if (auto it = f.find("slots"); it != f.end()) {
    for (absl::string_view slot : absl::StrSplit(it->second, ',', absl::SkipEmpty())) {
      std::pair<std::string, std::string> tk = absl::StrSplit(slot, ':');
      int t = 0;
      int64_t k = 0;
      if (absl::SimpleAtoi(tk.first, &t) && absl::SimpleAtoi(tk.second, &k)) call.slots[t] = k;
    }
  }
  return call;
}

// A failure that says where it happened: a rank or a worker.
bool Named(const CallOutcome& call) {
  return absl::StrContains(call.message, "rank ") || absl::StrContains(call.message, "worker ");
}

}  // namespace

const CallOutcome* TrainerLog::Find(int64_t k) const {
  auto it = std::lower_bound(calls.begin(), calls.end(), k,
                             [](const CallOutcome& c, int64_t key) { return c.k < key; });
  return it != calls.end() && it->k == k ? &*it : nullptr;
}

TrainerLog ParseTrainerLog(int trainer, const std::string& text) {
  TrainerLog log;
  log.trainer = trainer;
  AppendTrainerLines(log, text);
  return log;
}

void AppendTrainerLines(TrainerLog& log, absl::string_view lines) {
  for (absl::string_view line : absl::StrSplit(lines, '\n', absl::SkipEmpty())) {
    if (absl::StartsWith(line, "call ")) {
      log.calls.push_back(ParseCall(Fields(line)));
      const CallOutcome& call = log.calls.back();
      if (call.ok && absl::StartsWith(call.name, "step/")) ++log.ok_steps;
    } else if (absl::StartsWith(line, "wrong ")) {
      log.wrong.emplace_back(line);
    } else if (absl::StartsWith(line, "done ")) {
      log.done = true;
    } else if (absl::StartsWith(line, "connected ") || absl::StartsWith(line, "lost_worker ")) {
      if (absl::StartsWith(line, "connected ")) ++log.connects;
      log.connect_lines.emplace_back(line);
    }
  }
}

Verdict CheckOutcomes(const std::vector<TrainerLog>& logs) {
  Verdict v;
  std::map<int, const TrainerLog*> by_trainer;
  for (const TrainerLog& log : logs) by_trainer[log.trainer] = &log;
  // A collective is named by its participants' call numbers: count each partial one once.
  std::set<std::map<int, int64_t>> partial;
  auto problem = [&](const std::string& line) {
    if (v.problems.size() < kProblemsKept) v.problems.push_back(line);
  };
  for (const TrainerLog& log : logs) {
    for (const std::string& line : log.wrong) problem(absl::StrCat("trainer ", log.trainer, ": ", line));
    v.wrong += static_cast<int64_t>(log.wrong.size());
    for (const CallOutcome& call : log.calls) {
      ++v.calls;
      if (!call.ok) {
        ++v.failed;
        v.membership_changed += call.membership_changed;
        if (!call.lost_worker && !Named(call)) {
          ++v.unnamed_failures;
          problem(absl::StrCat("trainer ", log.trainer, " call ", call.k, " '", call.name,
                               "' failed without naming a rank or worker: ", call.message));
        }
        continue;
      }
      ++v.ok;
      for (const auto& [t, k] : call.slots) {
        if (t == log.trainer) continue;
        auto other = by_trainer.find(t);
        const CallOutcome* theirs = other == by_trainer.end() ? nullptr : other->second->Find(k);
        const std::string where = absl::StrCat("trainer ", log.trainer, " call ", call.k, " '",
                                               call.name, "' OK with trainer ", t, "'s call ", k);
        if (theirs == nullptr) {
          partial.insert(call.slots);
          problem(absl::StrCat(where, ", which trainer ", t, " never logged"));
        } else if (!theirs->ok && theirs->lost_worker) {
          ++v.lost_worker;
        } else if (!theirs->ok && theirs->in_doubt) {
          ++v.in_doubt;
        } else if (!theirs->ok) {
          partial.insert(call.slots);
          problem(absl::StrCat(where, ", which failed there: ", theirs->message));
        } else if (theirs->slots != call.slots || theirs->name != call.name) {
          partial.insert(call.slots);
          problem(absl::StrCat(where, ", which ended with other participants there"));
        }
      }
    }
  }
  v.partial = static_cast<int64_t>(partial.size());
  return v;
}

std::string Verdict::Summary() const {
  std::string s = absl::StrCat("calls ", calls, " (ok ", ok, ", failed ", failed,
                               ", membership changed ", membership_changed, "); wrong ", wrong,
                               ", partial ", partial, ", in doubt ", in_doubt,
                               ", lost own worker ", lost_worker, ", unnamed failures ",
                               unnamed_failures);
  if (!problems.empty()) absl::StrAppend(&s, "\n  ", absl::StrJoin(problems, "\n  "));
  return s;
}

}  // namespace ringsync::chaos
