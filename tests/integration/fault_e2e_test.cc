// End to end, when things go wrong: disagreeing ranks, a training process killed
// mid-collective, a worker killed with SIGKILL. Never a hang, never a silent wrong
// answer, and every rank learns which rank caused it.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/strings/str_cat.h"
#include "core/collective.h"
#include "core/sync/steady_deadline.h"
#include "core/sync/steady_stopwatch.h"
#include "gmock/gmock.h"
#include "tests/integration/cluster_fixture.h"

namespace ringsync {
namespace {

using ::testing::AnyOf;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::AwaitLogLine;
using testing::ConnectAll;
using testing::ExpectAllOk;
using testing::OnEveryRank;
using testing::StartCluster;

constexpr absl::Duration kDeadline = absl::Seconds(20);

// The SDK's files of process `pid` in /dev/shm (named ringsync-<pid>-...).
std::vector<std::string> SharedMemoryFilesOf(pid_t pid) {
  std::vector<std::string> files;
  const std::string prefix = absl::StrCat("ringsync-", pid, "-");
  for (const auto& entry : std::filesystem::directory_iterator("/dev/shm")) {
    if (absl::StartsWith(entry.path().filename().string(), prefix)) {
      files.push_back(entry.path().string());
    }
  }
  return files;
}
constexpr absl::Duration kSlack = absl::Seconds(5);
const std::vector<std::string> kWorkerFlags = {"--collective_timeout=20s"};
// Steps a rank runs at most while it waits for a fault to fail one.
constexpr int kMaxSteps = 1000;

// Runs `step` until it fails (its status) or `max_steps` succeeded (an error saying so).
absl::Status RepeatUntilItFails(int max_steps, absl::FunctionRef<absl::Status()> step) {
  for (int i = 0; i < max_steps; ++i) {
    if (absl::Status s = step(); !s.ok()) return s;
  }
  return absl::InternalError(absl::StrCat(max_steps, " steps succeeded: the fault never came"));
}

TEST(Faults, RanksDisagreeingOnSizeAllFailWithinTheDeadline) {
  auto cluster = StartCluster(4, kWorkerFlags);
  ASSERT_NE(cluster, nullptr);
  auto clients = ConnectAll(*cluster);
  const SteadyStopwatch start;
  std::vector<absl::Status> statuses = OnEveryRank(clients, [&](int r, Client& c) {
    std::vector<float> grad(r == 1 ? 1000 : 1024, 1.0f);
    return c.AllReduce("grad/fc1", absl::MakeSpan(grad), ReduceOp::kSum);
  });
  EXPECT_LT(start.Elapsed(), kDeadline);
  for (const absl::Status& s : statuses) {
    EXPECT_THAT(std::string(s.message()), HasSubstr("1000 x float32")) << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr("1024 x float32")) << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr("'grad/fc1'")) << s;
  }
  // The ring is still usable afterwards.
  ExpectAllOk(OnEveryRank(clients, [&](int, Client& c) {
    std::vector<float> grad(1024, 1.0f);
    return c.AllReduce("grad/fc1", absl::MakeSpan(grad), ReduceOp::kSum);
  }));
}

TEST(Faults, ACallOneRankRefusesFailsEveryRankAtOnceAndTheNextCollectiveRuns) {
  auto cluster = StartCluster(3, kWorkerFlags);
  ASSERT_NE(cluster, nullptr);
  auto clients = ConnectAll(*cluster);
  std::vector<absl::Status> statuses = OnEveryRank(clients, [&](int r, Client& c) {
    std::vector<float> grad(64, 1.0f);
    // Rank 1's name is too long: its SDK refuses the call, and tells the ring.
    const std::string name = r == 1 ? std::string(1025, 'g') : "grad/fc1";
    return c.AllReduce(name, absl::MakeSpan(grad), ReduceOp::kSum);
  });
  EXPECT_TRUE(absl::IsInvalidArgument(statuses[1])) << statuses[1];
  for (int r : {0, 2}) {
    // At once, not at the 20 s deadline: the refusal took rank 1's turn on the ring.
    EXPECT_TRUE(absl::IsAborted(statuses[r])) << statuses[r];
    EXPECT_THAT(std::string(statuses[r].message()),
                HasSubstr("rank 1 gave up: worker w1 refused its client's request: its "
                          "training process refused its own call"))
        << statuses[r];
    EXPECT_THAT(std::string(statuses[r].message()), HasSubstr("name is 1025 bytes long"));
  }
  ExpectAllOk(OnEveryRank(clients, [&](int, Client& c) {
    std::vector<float> grad(64, 1.0f);
    absl::Status s = c.AllReduce("grad/fc1", absl::MakeSpan(grad), ReduceOp::kSum);
    if (s.ok() && grad[0] != 3.0f) return absl::InternalError("wrong sum");
    return s;
  }));
}

TEST(Faults, ACallerRefusingItsOwnCollectiveFailsEveryRankAtOnceWhateverTheKind) {
  auto cluster = StartCluster(3, kWorkerFlags);
  ASSERT_NE(cluster, nullptr);
  auto clients = ConnectAll(*cluster);
  // Large enough for shared memory (the other ranks' data is staged before the refusal).
  constexpr size_t kCount = 3 << 18;
  for (CollectiveKind kind :
       {CollectiveKind::kBroadcast, CollectiveKind::kAllGather, CollectiveKind::kReduceScatter}) {
    SCOPED_TRACE(CollectiveKindName(kind));
    const SteadyStopwatch start;
    std::vector<absl::Status> statuses = OnEveryRank(clients, [&](int r, Client& c) {
      std::vector<float> input(kCount, 1.0f);
      std::vector<float> output(kind == CollectiveKind::kAllGather ? 3 * kCount : kCount / 3);
      if (r == 2) {
        // A binding's own check failed (as torch's list of the wrong length would).
        return c.Refuse(kind, "torch.op", "ringsync op: expected 3 tensors, got 2").Wait();
      }
      switch (kind) {
        case CollectiveKind::kBroadcast:
          return c.Broadcast("torch.op", absl::MakeSpan(input), /*root=*/0);
        case CollectiveKind::kAllGather:
          return c.AllGather<float>("torch.op", input, absl::MakeSpan(output));
        default:
          return c.ReduceScatter<float>("torch.op", input, absl::MakeSpan(output), ReduceOp::kSum);
      }
    });
    // At once, not at the 20 s deadline: the refusal took rank 2's turn on the ring.
    EXPECT_LT(start.Elapsed(), kDeadline / 2);
    EXPECT_TRUE(absl::IsInvalidArgument(statuses[2])) << statuses[2];
    EXPECT_EQ(statuses[2].message(), "ringsync op: expected 3 tensors, got 2");
    for (int r : {0, 1}) {
      EXPECT_TRUE(absl::IsAborted(statuses[r])) << statuses[r];
      EXPECT_THAT(std::string(statuses[r].message()),
                  HasSubstr("rank 2 gave up: worker w2 refused its client's request: its "
                            "training process refused its own call: ringsync op: expected 3 "
                            "tensors, got 2"))
          << statuses[r];
    }
  }
  // The ranks stayed in step: the next collective runs everywhere.
  ExpectAllOk(OnEveryRank(clients, [&](int, Client& c) {
    std::vector<float> grad(64, 1.0f);
    absl::Status s = c.AllReduce("grad/fc1", absl::MakeSpan(grad), ReduceOp::kSum);
    if (s.ok() && grad[0] != 3.0f) return absl::InternalError("wrong sum");
    return s;
  }));
  // A kind that is none takes no turn: only the caller learns of it.
  absl::Status none = clients[0]->Refuse(static_cast<CollectiveKind>(9), "x", "why").Wait();
  EXPECT_TRUE(absl::IsInvalidArgument(none)) << none;
  EXPECT_THAT(std::string(none.message()), HasSubstr("9 is not a collective kind"));
  ExpectAllOk(OnEveryRank(clients, [&](int, Client& c) { return c.Barrier("after"); }));
}

TEST(Faults, RanksDisagreeingOnDtypeAllFail) {
  auto cluster = StartCluster(3, kWorkerFlags);
  ASSERT_NE(cluster, nullptr);
  auto clients = ConnectAll(*cluster);
  std::vector<absl::Status> statuses = OnEveryRank(clients, [&](int r, Client& c) {
    if (r == 2) {
      std::vector<double> grad(64, 1.0);
      return c.AllReduce("w", absl::MakeSpan(grad), ReduceOp::kSum);
    }
    std::vector<float> grad(64, 1.0f);
    return c.AllReduce("w", absl::MakeSpan(grad), ReduceOp::kSum);
  });
  for (const absl::Status& s : statuses) {
    EXPECT_THAT(std::string(s.message()), HasSubstr("float64")) << s;
  }
}

TEST(Faults, AClientKilledMidCollectiveFailsTheOthersNamingItsRankAndTheRingGoesOn) {
  auto cluster = StartCluster(4, kWorkerFlags);
  ASSERT_NE(cluster, nullptr);
  // Ranks 0-2 in this process; rank 3's training process is a child we can kill. (The
  // clients connect once the ring is formed, which needs no client on rank 3.)
  std::vector<std::unique_ptr<Client>> clients = ConnectAll(*cluster, 3);
  const std::vector<std::string> child = {TEST_CLIENT_PATH, "--worker=" + cluster->worker_target(3),
                                          "--elements=16777216",
                                          absl::StrCat("--iterations=", kMaxSteps)};
  absl::StatusOr<ChildProcess*> victim = cluster->Spawn("victim", child);
  ASSERT_TRUE(victim.ok());
  const pid_t victim_pid = (*victim)->pid();
  // As if the victim had also created a file it never got to send.
  const std::string unsent = absl::StrCat("/dev/shm/ringsync-", victim_pid, "-999-unsent");
  std::ofstream(unsent) << "x";
  ASSERT_TRUE(AwaitLogLine(*cluster, "victim", "starting 0", absl::Seconds(30)))
      << cluster->Log("victim");
  const size_t count = 16777216;
  std::vector<absl::Status> statuses;
  {
    std::jthread killer([&] {
      absl::SleepFor(absl::Milliseconds(150));  // the collective is under way
      (*victim)->Signal(SIGKILL);
    });
    // Step after step until one fails (a fast path can complete one before the kill).
    statuses = OnEveryRank(clients, [&](int, Client& c) -> absl::Status {
      std::vector<float> tensor(count, 1.0f);
      return RepeatUntilItFails(kMaxSteps, [&]() -> absl::Status {
        std::fill(tensor.begin(), tensor.end(), 1.0f);
        absl::Status s = c.AllReduce("step", absl::MakeSpan(tensor), ReduceOp::kSum);
        // Whatever the worker had reduced of the copy it was given (staged in registered
        // memory, reduced in place there), the caller's span is as it was.
        if (!s.ok() && std::any_of(tensor.begin(), tensor.end(), [](float v) { return v != 1.0f; })) {
          return absl::InternalError(
              absl::StrCat("the failed collective changed the span: ", s.message()));
        }
        return s;
      });
    });
  }
  for (int r = 0; r < 3; ++r) {
    EXPECT_FALSE(statuses[r].ok()) << "rank " << r;
    EXPECT_THAT(std::string(statuses[r].message()), Not(HasSubstr("changed the span")));
    EXPECT_THAT(std::string(statuses[r].message()), AnyOf(HasSubstr("rank 3"), HasSubstr("w3")))
        << "rank " << r << ": " << statuses[r];
  }
  // A new training process for rank 3 attaches, and the next collective succeeds.
  const std::vector<std::string> replacement = {TEST_CLIENT_PATH,
                                                "--worker=" + cluster->worker_target(3),
                                                "--elements=1000", "--iterations=1"};
  absl::StatusOr<ChildProcess*> second = cluster->Spawn("replacement", replacement);
  ASSERT_TRUE(second.ok());
  ASSERT_TRUE(AwaitLogLine(*cluster, "replacement", "ready rank=3", absl::Seconds(30)))
      << cluster->Log("replacement");
  // The victim never removed the unsent file: its worker did, when the victim detached.
  // (Its 64 MiB tensor was staged in a memfd, which went with it.)
  EXPECT_THAT(SharedMemoryFilesOf(victim_pid), ::testing::IsEmpty());
  ExpectAllOk(OnEveryRank(clients, [&](int, Client& c) {
    std::vector<float> tensor(1000, 1.0f);
    absl::Status s = c.AllReduce("step", absl::MakeSpan(tensor), ReduceOp::kSum);
    if (s.ok() && tensor[0] != 4.0f) return absl::InternalError("wrong sum");
    return s;
  }));
  EXPECT_EQ((*second)->Wait(absl::Seconds(30)).value_or(-1), 0) << cluster->Log("replacement");
}

TEST(Faults, AKilledIdleTrainerFailsTheOthersNextCollectiveAtOnceNamingItsWorker) {
  auto cluster = StartCluster(4, kWorkerFlags);
  ASSERT_NE(cluster, nullptr);
  std::vector<std::unique_ptr<Client>> clients = ConnectAll(*cluster, 3);
  const std::vector<std::string> child = {TEST_CLIENT_PATH, "--worker=" + cluster->worker_target(3),
                                          "--iterations=0", "--linger=60s"};
  absl::StatusOr<ChildProcess*> victim = cluster->Spawn("victim", child);
  ASSERT_TRUE(victim.ok());
  ASSERT_TRUE(AwaitLogLine(*cluster, "victim", "lingering", absl::Seconds(30)))
      << cluster->Log("victim");
  (*victim)->Signal(SIGKILL);  // no goodbye
  absl::SleepFor(absl::Milliseconds(1500));  // past the worker's 1 s re-attach grace
  const SteadyStopwatch start;
  for (const absl::Status& s : OnEveryRank(clients, [](int, Client& c) {
         std::vector<float> v(100, 1.0f);
         AllReduceOptions options;
         options.timeout = absl::Seconds(20);
         return c.AllReduce("step", absl::MakeSpan(v), ReduceOp::kSum, options);
       })) {
    EXPECT_TRUE(absl::IsAborted(s)) << s;
    EXPECT_THAT(std::string(s.message()),
                HasSubstr("rank 3 gave up: worker w3 has no training process attached"))
        << s;
  }
  std::printf("time to error after a killed trainer: %s\n",
              absl::FormatDuration(start.Elapsed()).c_str());
}

TEST(Faults, AWorkerKilledWithSigkillFailsEveryOtherRankWithinTheDeadline) {
  auto cluster = StartCluster(4, kWorkerFlags, {"--heartbeat_timeout=3s"});
  ASSERT_NE(cluster, nullptr);
  auto clients = ConnectAll(*cluster);
  const size_t count = 16777216;
  // Filled before the clock starts, so every rank's collective is on its way when the
  // worker dies (filling 64 MiB can take longer than the 200 ms under load).
  std::vector<std::vector<float>> tensors(4, std::vector<float>(count, 1.0f));
  std::vector<absl::Status> statuses;
  const SteadyStopwatch start;
  {
    std::jthread killer([&] {
      absl::SleepFor(absl::Milliseconds(200));
      cluster->worker(2).Signal(SIGKILL);
    });
    // Step after step until one fails: on a fast path (same host, shared memory) a 64 MiB
    // all-reduce can complete before the kill.
    statuses = OnEveryRank(clients, [&](int r, Client& c) {
      return RepeatUntilItFails(kMaxSteps, [&] {
        return c.AllReduce("step", absl::MakeSpan(tensors[r]), ReduceOp::kSum);
      });
    });
  }
  // A rank whose collective had not reached the ring yet waits for a new ring until its
  // deadline; allow for the time it took to fill its tensor and the abort notice.
  EXPECT_LT(start.Elapsed(), kDeadline + kSlack) << "no rank may wait past its deadline";
  for (int r : {0, 1, 3}) {
    EXPECT_FALSE(statuses[r].ok()) << "rank " << r;
    EXPECT_THAT(std::string(statuses[r].message()), AnyOf(HasSubstr("rank 2"), HasSubstr("w2")))
        << "rank " << r << ": " << statuses[r];
  }
  // Rank 2 lost its own worker: mid-call (Unavailable), or, if the kill came first, when
  // it found its client detached (FailedPrecondition: connect a new Client). Either way
  // it is told so.
  EXPECT_THAT(statuses[2].code(), AnyOf(absl::StatusCode::kUnavailable,
                                        absl::StatusCode::kFailedPrecondition))
      << statuses[2];
  EXPECT_THAT(std::string(statuses[2].message()), HasSubstr("lost the worker")) << statuses[2];
  if (absl::IsUnavailable(statuses[2])) {
    // Named like every rank's error, though the worker that would have named it is gone.
    EXPECT_THAT(std::string(statuses[2].message()), HasSubstr("rank 2 (generation "));
    EXPECT_THAT(std::string(statuses[2].message()), HasSubstr("collective 'step'"));
  }
}

// The worker dies while the SDK is still copying a call's tensor into shared memory (a
// fresh file of 256 MiB: the longest copy in): the call must still fail, promptly, and
// not wait for an answer through the call channel that no worker will write.
TEST(Faults, ACallWhoseTensorIsBeingStagedWhenTheWorkerDiesFailsAndDoesNotWait) {
  auto cluster = StartCluster(1, kWorkerFlags);
  ASSERT_NE(cluster, nullptr);
  std::vector<float> tensor(size_t{64} << 20, 1.0f);
  for (const int delay_ms : {0, 10, 30, 60}) {
    SCOPED_TRACE(absl::StrCat("killed after ", delay_ms, " ms"));
    ClientOptions options;
    options.stage_in_registered_memory = false;  // a file, made for this call
    auto clients = ConnectAll(*cluster, -1, options);
    ASSERT_NE(clients[0], nullptr);
    std::optional<CollectiveHandle> handle;
    absl::Status status;
    {
      std::jthread killer([&] {
        absl::SleepFor(absl::Milliseconds(delay_ms));
        cluster->worker(0).Signal(SIGKILL);
      });
      handle = clients[0]->AllReduceAsync("staged", absl::MakeSpan(tensor), ReduceOp::kSum);
      status = handle->Wait(absl::Seconds(30));
    }
    EXPECT_FALSE(absl::IsDeadlineExceeded(status)) << "no answer will come: " << status;
    clients.clear();  // a call left waiting ends here, cancelled with its Client
    handle.reset();
    ASSERT_TRUE(cluster->RestartWorker(0).ok());
  }
}

absl::Status SumOnce(Client& c, const std::string& name, absl::Duration timeout = absl::Seconds(20)) {
  std::vector<int32_t> v(100, 1);
  AllReduceOptions options;
  options.timeout = timeout;
  absl::Status s = c.AllReduce(name, absl::MakeSpan(v), ReduceOp::kSum, options);
  if (s.ok() && v[0] != 4) return absl::InternalError(absl::StrCat("sum ", v[0]));
  return s;
}

TEST(Recovery, ASecondJobRunsOnTheSameWorkersEvenIfItsTrainersStartApart) {
  auto cluster = StartCluster(4, kWorkerFlags);
  ASSERT_NE(cluster, nullptr);
  {
    auto first_job = ConnectAll(*cluster);
    ExpectAllOk(OnEveryRank(first_job, [](int, Client& c) { return SumOnce(c, "job1"); }));
  }  // the first job's trainers exit
  auto second_job = ConnectAll(*cluster);
  ExpectAllOk(OnEveryRank(second_job, [](int r, Client& c) {
    absl::SleepFor(absl::Milliseconds(300 * r));  // rank 0 starts first, rank 3 last
    return SumOnce(c, "job2");
  }));
}

TEST(Recovery, AProcessThatConnectsAgainAtOnceFindsItsEarlierClientsFilesGoneAndKeepsItsNewOnes) {
  auto cluster = StartCluster(1, kWorkerFlags);
  ASSERT_NE(cluster, nullptr);
  // Every tensor through a file of its own in /dev/shm: the path whose names carry the
  // pid, which this process keeps from one client to the next.
  ClientOptions options;
  options.call_channel = false;
  options.staging_arena_bytes = 0;
  options.stage_in_registered_memory = false;
  const std::vector<float> ones(size_t{2} << 20 >> 2, 1.0f);
  for (int round = 0; round < 20; ++round) {
    absl::StatusOr<std::unique_ptr<Client>> client =
        Client::Connect(cluster->worker_target(0), options);
    ASSERT_TRUE(client.ok()) << "round " << round << ": " << client.status();
    // The worker removed the previous client's files before it let this one attach.
    EXPECT_THAT(SharedMemoryFilesOf(::getpid()), ::testing::IsEmpty()) << "round " << round;
    std::vector<float> tensor = ones;
    ASSERT_TRUE((*client)->AllReduce("step", absl::MakeSpan(tensor), ReduceOp::kSum).ok())
        << "round " << round;
    EXPECT_EQ(tensor, ones) << "round " << round;
    if (round == 19) break;  // the last client leaves no file of the test's behind
    // As if this client had also created files it never got to send: many, so that
    // removing them takes the worker a while (a next client must not slip in before).
    for (int file = 0; file < 1000; ++file) {
      std::ofstream(absl::StrCat("/dev/shm/ringsync-", ::getpid(), "-", 1000000 + file, "-unsent"))
          << "x";
    }
  }
}

TEST(Recovery, ARankWhoseTrainerMissedACollectiveCatchesUpWithTheRing) {
  auto cluster = StartCluster(4, kWorkerFlags);
  ASSERT_NE(cluster, nullptr);
  auto clients = ConnectAll(*cluster);
  // Rank 3's trainer says goodbye and goes away; the others run a collective without it
  // and time out (its worker holds the collective for a next trainer).
  clients[3].reset();
  std::vector<std::unique_ptr<Client>> three;
  for (int r = 0; r < 3; ++r) three.push_back(std::move(clients[r]));
  for (const absl::Status& s : OnEveryRank(three, [](int, Client& c) {
         return SumOnce(c, "missed", absl::Seconds(2));
       })) {
    EXPECT_FALSE(s.ok());
    EXPECT_THAT(std::string(s.message()), AnyOf(HasSubstr("rank 3"), HasSubstr("w3"))) << s;
  }
  // A new trainer for rank 3; every rank's next collective succeeds.
  ClientOptions options;
  absl::StatusOr<std::unique_ptr<Client>> rejoined = Client::Connect(cluster->worker_target(3), options);
  ASSERT_TRUE(rejoined.ok()) << rejoined.status();
  for (int r = 0; r < 3; ++r) clients[r] = std::move(three[r]);
  clients[3] = *std::move(rejoined);
  ExpectAllOk(OnEveryRank(clients, [](int, Client& c) { return SumOnce(c, "next"); }));
}

}  // namespace
}  // namespace ringsync
