// ringsync-chaos-trainer: a training process for the chaos tests and measures. It runs
// --steps int64 SUM all-reduces named "step/S" through its worker and logs one line per
// collective it issued, so a test can check across all trainers that no result was wrong
// and no collective ended OK on some ranks and failed on others.
//
// Every tensor starts with a header that makes the result self-describing:
//   [0]                count: each trainer adds 1, so the result is the ranks that took part
//   [1 + t]            trainer t's call number (t = --index < kChaosSlots), 0 for the others,
//                      so the result names each participant's call
//   [1 + kChaosSlots + t]  trainer t's next step (used by "sync")
// and the payload after it is the same function of (step, element) on every rank, so an
// exact result is W times it. A result that breaks any of this is logged as "wrong".
//
// After any failure the trainer re-synchronises with the ring (as an elastic training loop
// does): it repeats the collective "sync" until it succeeds, then continues at the largest
// step any participant had reached. After losing its worker it connects again
// (--reconnect_timeout), as a restarted training process would.
//
// Lines (one per event, stdout, flushed):
//   connected rank=R world=W generation=G
//   call k=K name=N status=ok rank=R world=W ms=T t_us=U slots=T:K,...
//   call k=K name=N status=failed code=C membership_changed=0|1 in_doubt=0|1
//        lost_worker=0|1 rank=R world=W ms=T t_us=U msg=MESSAGE
//   wrong k=K name=N why=...
//   done steps=S calls=K wrong=X
// Exit: 0 all steps done; 2 the --deadline passed; 3 lost the worker without reconnecting.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "core/sync/steady_deadline.h"
#include "core/sync/steady_stopwatch.h"
#include "ringsync/client.h"
#include "ringsync/outcome.h"
#include "tests/chaos/chaos_layout.h"

ABSL_FLAG(std::string, worker, "", "SDK target of the worker");
ABSL_FLAG(int, index, 0, "this trainer's slot in the tensor header, 0..7, unique per job");
ABSL_FLAG(int64_t, steps, 100, "steps (successful all-reduces) to run");
ABSL_FLAG(std::string, sizes, "16,1024,65536",
          "element counts (int64) the steps cycle through; at least the header's");
ABSL_FLAG(absl::Duration, timeout, absl::Seconds(10), "deadline of each collective");
ABSL_FLAG(absl::Duration, deadline, absl::Seconds(120), "give up (exit 2) after this long");
ABSL_FLAG(absl::Duration, connect_timeout, absl::Seconds(30), "wait for a formed ring");
ABSL_FLAG(absl::Duration, reconnect_timeout, absl::Seconds(60),
          "after losing the worker, keep connecting this long; 0: exit 3 at once");
ABSL_FLAG(absl::Duration, pause, absl::ZeroDuration(), "sleep before each step");
ABSL_FLAG(int64_t, stall_at_step, -1, "a straggler: before this step, sleep --stall");
ABSL_FLAG(absl::Duration, stall, absl::ZeroDuration(), "how long the straggler sleeps");
ABSL_FLAG(absl::Duration, retry_pause, absl::Milliseconds(20),
          "sleep after a failed sync before the next");

namespace ringsync::chaos {
namespace {

void Print(const std::string& line) {
  std::fputs((line + "\n").c_str(), stdout);
  std::fflush(stdout);
}

int64_t NowMicros() { return absl::ToUnixMicros(absl::Now()); }

bool LostWorker(const absl::Status& s) {
  return absl::StrContains(s.message(), "lost the worker") ||
         absl::StrContains(s.message(), "no longer attached");
}

std::vector<int64_t> ParseSizes(const std::string& text) {
  std::vector<int64_t> sizes;
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    int64_t n = 0;
    if (absl::SimpleAtoi(part, &n)) sizes.push_back(std::max<int64_t>(n, kHeaderElements));
  }
  if (sizes.empty()) sizes.push_back(kHeaderElements);
  return sizes;
}

class Trainer {
 public:
  Trainer() : index_(absl::GetFlag(FLAGS_index)), sizes_(ParseSizes(absl::GetFlag(FLAGS_sizes))) {}

  int Run() {
    const SteadyDeadline deadline(absl::GetFlag(FLAGS_deadline));
    if (!Connect(absl::GetFlag(FLAGS_connect_timeout))) return 1;
    bool synced = false;
    while (step_ < absl::GetFlag(FLAGS_steps)) {
      if (deadline.Passed()) {
        Print(absl::StrCat("deadline step=", step_, " calls=", calls_));
        return 2;
      }
      absl::Status s = synced ? Step() : Sync();
      synced = s.ok();
      if (s.ok() || !LostWorker(s)) {
        if (!s.ok()) absl::SleepFor(absl::GetFlag(FLAGS_retry_pause));
        continue;
      }
      const SteadyStopwatch lost;
      client_.reset();
      Print(absl::StrCat("lost_worker t_us=", NowMicros(), " closing_ms=",
                         absl::ToInt64Milliseconds(lost.Elapsed())));
      const absl::Duration reconnect = absl::GetFlag(FLAGS_reconnect_timeout);
      if (reconnect <= absl::ZeroDuration() || !Connect(std::min(reconnect, deadline.Left()))) {
        Print(absl::StrCat("gave_up step=", step_, " calls=", calls_));
        return 3;
      }
    }
    Print(absl::StrCat("done steps=", step_, " calls=", calls_, " wrong=", wrong_));
    return wrong_ == 0 ? 0 : 4;
  }

 private:
  bool Connect(absl::Duration timeout) {
    const SteadyStopwatch start;
    const SteadyDeadline until(timeout);
    absl::Status last;
    int attempts = 0;
    while (!until.Passed()) {
      ++attempts;
      ClientOptions options;
      options.connect_timeout = until.Left();
      options.client_name = absl::StrCat("chaos trainer ", index_);
      absl::StatusOr<std::unique_ptr<Client>> client =
          Client::Connect(absl::GetFlag(FLAGS_worker), options);
      if (client.ok()) {
        client_ = *std::move(client);
        // When and after what: a reconnect that took long says why (its last refusal).
        Print(absl::StrCat("connected rank=", client_->rank(), " world=", client_->world_size(),
                           " generation=", client_->generation(), " t_us=", NowMicros(),
                           " waited_ms=", absl::ToInt64Milliseconds(start.Elapsed()),
                           " attempts=", attempts,
                           last.ok() ? "" : " last_refusal=" + OneLine(std::string(last.message()))));
        return true;
      }
      last = client.status();
      absl::SleepFor(absl::Milliseconds(50));  // the worker may still be starting
    }
    Print(absl::StrCat("connect_failed msg=", OneLine(last.ToString())));
    return false;
  }

  static std::string OneLine(std::string text) {
    absl::StrReplaceAll({{"\n", " "}, {"\r", " "}}, &text);
    return text;
  }

  // One collective: logs its outcome; the tensor holds the result on OK.
  absl::Status Call(const std::string& name, std::vector<int64_t>& tensor) {
    const int64_t k = ++calls_;
    tensor[0] = 1;
    tensor[CallSlot(index_)] = k;
    tensor[StepSlot(index_)] = step_;
    AllReduceOptions options;
    options.timeout = absl::GetFlag(FLAGS_timeout);
    const int rank = client_->rank(), world = client_->world_size();
    const SteadyStopwatch start;
    absl::Status s = client_->AllReduce(name, absl::MakeSpan(tensor), ReduceOp::kSum, options);
    const std::string common =
        absl::StrCat("call k=", k, " name=", name, " status=", s.ok() ? "ok" : "failed");
    const std::string where = absl::StrCat(" rank=", rank, " world=", world, " ms=",
                                           absl::ToDoubleMilliseconds(start.Elapsed()),
                                           " t_us=", NowMicros());
    if (s.ok()) {
      std::vector<std::string> slots;
      for (int t = 0; t < kChaosSlots; ++t) {
        if (tensor[CallSlot(t)] != 0) slots.push_back(absl::StrCat(t, ":", tensor[CallSlot(t)]));
      }
      Print(absl::StrCat(common, where, " slots=", absl::StrJoin(slots, ",")));
    } else {
      Print(absl::StrCat(common, " code=", absl::StatusCodeToString(s.code()),
                         " membership_changed=", IsMembershipChanged(s) ? 1 : 0,
                         " in_doubt=", IsInDoubt(s) ? 1 : 0, " lost_worker=", LostWorker(s) ? 1 : 0,
                         where, " msg=", OneLine(std::string(s.message()))));
    }
    return s;
  }

  // Checks a result against the header's promise; logs and counts what is wrong.
  bool CheckResult(const std::string& name, const std::vector<int64_t>& tensor, bool payload) {
    std::string why;
    int participants = 0;
    for (int t = 0; t < kChaosSlots; ++t) participants += tensor[CallSlot(t)] != 0;
    if (tensor[0] != participants) {
      why = absl::StrCat("count ", tensor[0], " but ", participants, " call slots set");
    } else if (tensor[CallSlot(index_)] != calls_) {
      why = absl::StrCat("own call slot ", tensor[CallSlot(index_)], " != ", calls_);
    } else if (payload) {
      for (size_t j = kHeaderElements; j < tensor.size(); ++j) {
        if (tensor[j] != tensor[0] * Payload(step_, j)) {
          why = absl::StrCat("element ", j, " is ", tensor[j], ", expected ", tensor[0], " x ",
                             Payload(step_, j));
          break;
        }
      }
    }
    if (why.empty()) return true;
    ++wrong_;
    Print(absl::StrCat("wrong k=", calls_, " name=", name, " why=", why));
    return false;
  }

  absl::Status Step() {
    if (step_ == absl::GetFlag(FLAGS_stall_at_step) && !stalled_) {
      stalled_ = true;  // once: a retry of the step after the ring gave up runs at once
      absl::SleepFor(absl::GetFlag(FLAGS_stall));
    }
    if (absl::GetFlag(FLAGS_pause) > absl::ZeroDuration()) absl::SleepFor(absl::GetFlag(FLAGS_pause));
    std::vector<int64_t> tensor(static_cast<size_t>(sizes_[step_ % sizes_.size()]), 0);
    for (size_t j = kHeaderElements; j < tensor.size(); ++j) tensor[j] = Payload(step_, j);
    const std::string name = absl::StrCat("step/", step_);
    absl::Status status = Call(name, tensor);
    if (status.ok() && CheckResult(name, tensor, /*payload=*/true)) ++step_;
    return status;
  }

  // Agrees with the ring on the step to run next: the largest any participant reached.
  absl::Status Sync() {
    std::vector<int64_t> tensor(kHeaderElements, 0);
    absl::Status status = Call("sync", tensor);
    if (!status.ok()) return status;
    if (!CheckResult("sync", tensor, /*payload=*/false)) return absl::InternalError("wrong sync");
    int64_t next = step_;
    for (int t = 0; t < kChaosSlots; ++t) next = std::max(next, tensor[StepSlot(t)]);
    step_ = next;
    Print(absl::StrCat("sync k=", calls_, " step=", step_));
    return absl::OkStatus();
  }

  const int index_;
  const std::vector<int64_t> sizes_;
  std::unique_ptr<Client> client_;
  int64_t step_ = 0;
  int64_t calls_ = 0;
  int64_t wrong_ = 0;
  bool stalled_ = false;
};

}  // namespace
}  // namespace ringsync::chaos

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const int index = absl::GetFlag(FLAGS_index);
  if (absl::GetFlag(FLAGS_worker).empty() || index < 0 || index >= ringsync::chaos::kChaosSlots) {
    std::fprintf(stderr, "usage: --worker=TARGET --index=0..%d\n", ringsync::chaos::kChaosSlots - 1);
    return 1;
  }
  return ringsync::chaos::Trainer().Run();
}
