// CollectiveExecutor over in-memory rings: one executor per rank, each with its own
// epoch of one MemoryRing (through a FaultyLink, so a test can script the network), as
// the daemon has one per worker over gRPC.
#include "daemon/worker/collective_executor.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/link/faulty_link.h"
#include "core/link/memory_link.h"
#include "core/outcome.h"
#include "core/reduce/cpu_reducer.h"
#include "core/ring/input_arrival.h"
#include "core/sync/steady_deadline.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringsync {
namespace {

using ::testing::HasSubstr;

constexpr absl::Duration kWait = absl::Seconds(20);

// One rank's view of a ring that is formed from the start (or never, see fail_with).
class FixedEpochs final : public EpochSource {
 public:
  explicit FixedEpochs(std::shared_ptr<RingEpoch> epoch) : epoch_(std::move(epoch)) {}
  absl::StatusOr<std::shared_ptr<RingEpoch>> AwaitReady(const WaitLimit&) override {
    if (!fail_with.ok()) return fail_with;
    return epoch_;
  }
  std::shared_ptr<RingEpoch> Ready() override { return fail_with.ok() ? epoch_ : nullptr; }
  MembershipSnapshot Membership() override {
    absl::MutexLock lock(&mu_);
    return membership_;
  }

  // As RingManager on a view with other members: the membership changes, then the
  // epoch ends.
  void ChangeMembership(const MembershipSnapshot& membership, const absl::Status& why) {
    {
      absl::MutexLock lock(&mu_);
      membership_ = membership;
    }
    epoch_->over.Cancel(why);
  }

  absl::Status fail_with;  // set before use: no ring, for this reason

 private:
  std::shared_ptr<RingEpoch> epoch_;
  absl::Mutex mu_;
  MembershipSnapshot membership_ ABSL_GUARDED_BY(mu_);
};

class ExecutorRing {
 public:
  explicit ExecutorRing(int n, AlgorithmPolicy algorithm = {}) : memory_(n) {
    for (int r = 0; r < n; ++r) {
      auto epoch = std::make_shared<RingEpoch>();
      epoch->me = RingMember{r, n, /*generation=*/5};
      for (int w = 0; w < n; ++w) epoch->worker_ids.push_back(absl::StrCat("w", w));
      auto link = std::make_unique<FaultyLink>(memory_.link(r));
      links_.push_back(link.get());
      epoch->link = std::move(link);
      sources_.push_back(std::make_unique<FixedEpochs>(epoch));
      executors_.push_back(std::make_unique<CollectiveExecutor>(
          absl::StrCat("w", r), *sources_.back(), reducer_,
          ExecutorOptions{.segment_bytes = 64,
                          .reattach_grace = absl::Milliseconds(100),
                          .algorithm = algorithm}));
      EXPECT_TRUE(executors_.back()->Attach());
    }
  }
  ~ExecutorRing() { executors_.clear(); }  // before the ring they run on

  CollectiveExecutor& executor(int rank) { return *executors_[rank]; }
  FixedEpochs& epochs(int rank) { return *sources_[rank]; }
  FaultyLink& link(int rank) { return *links_[rank]; }

 private:
  MemoryRing memory_;
  CpuReducer reducer_;
  std::vector<FaultyLink*> links_;
  std::vector<std::unique_ptr<FixedEpochs>> sources_;
  std::vector<std::unique_ptr<CollectiveExecutor>> executors_;
};

std::shared_ptr<CollectiveJob> Job(CollectiveKind kind, const std::string& name,
                                   uint64_t client_sequence, std::vector<float> data) {
  auto job = std::make_shared<CollectiveJob>();
  job->spec.kind = kind;
  job->spec.name = name;
  job->spec.dtype = kind == CollectiveKind::kBarrier ? DType::kUInt8 : DType::kFloat32;
  job->spec.count = data.size();
  job->spec.op = ReduceOp::kSum;
  job->client_sequence = client_sequence;
  job->deadline = SteadyDeadline(kWait);
  job->inline_data.resize(data.size() * sizeof(float));
  // memcpy from an empty vector's null data() is UB even for 0 bytes (UBSan says so).
  if (!data.empty()) std::memcpy(job->inline_data.data(), data.data(), job->inline_data.size());
  return job;
}

std::vector<float> Floats(const CollectiveJob& job) {
  std::vector<float> out(job.inline_data.size() / sizeof(float));
  if (!out.empty()) std::memcpy(out.data(), job.inline_data.data(), job.inline_data.size());
  return out;
}

void AwaitAll(const std::vector<std::shared_ptr<CollectiveJob>>& jobs) {
  for (const auto& job : jobs) ASSERT_TRUE(job->done.WaitForNotificationWithTimeout(kWait));
}

TEST(CollectiveExecutor, RunsEveryKindOnTheRingAndNumbersThemInOrder) {
  ExecutorRing ring(3);
  std::vector<std::shared_ptr<CollectiveJob>> sums, roots, gathers, barriers;
  for (int r = 0; r < 3; ++r) {
    const float x = static_cast<float>(r + 1);
    sums.push_back(Job(CollectiveKind::kAllReduce, "grad", 1, {x, 10 * x}));
    roots.push_back(Job(CollectiveKind::kBroadcast, "weights", 2, {x, x}));
    roots.back()->spec.root = 2;
    gathers.push_back(Job(CollectiveKind::kAllGather, "ids", 3, {x}));
    barriers.push_back(Job(CollectiveKind::kBarrier, "end", 4, {}));
    for (auto* jobs : {&sums, &roots, &gathers, &barriers}) {
      EXPECT_TRUE(ring.executor(r).Submit(jobs->back()).ok());
    }
  }
  AwaitAll(barriers);
  for (int r = 0; r < 3; ++r) {
    SCOPED_TRACE(absl::StrCat("rank ", r));
    for (auto* jobs : {&sums, &roots, &gathers, &barriers}) {
      EXPECT_TRUE((*jobs)[r]->status.ok()) << (*jobs)[r]->status;
      EXPECT_EQ((*jobs)[r]->generation, 5u);
    }
    EXPECT_EQ(Floats(*sums[r]), (std::vector<float>{6, 60}));
    EXPECT_EQ(Floats(*roots[r]), (std::vector<float>{3, 3}));
    EXPECT_EQ(Floats(*gathers[r]), (std::vector<float>{1, 2, 3})) << "every rank's slot, in order";
    EXPECT_EQ(sums[r]->spec.sequence, 1u);
    EXPECT_EQ(barriers[r]->spec.sequence, 4u) << "the ring numbers collectives 1, 2, 3, ...";
    EXPECT_EQ(ring.executor(r).counters().completed, 4u);
  }
}

TEST(CollectiveExecutor, AReduceScatterLeavesEachRanksBlockWhereItsResultSays) {
  ExecutorRing ring(3);
  std::vector<std::shared_ptr<CollectiveJob>> jobs;
  for (int r = 0; r < 3; ++r) {
    const float x = static_cast<float>(r + 1);
    jobs.push_back(Job(CollectiveKind::kReduceScatter, "shard", 1, {x, 2 * x, 3 * x, 4 * x, 5 * x, 6 * x}));
    EXPECT_TRUE(ring.executor(r).Submit(jobs.back()).ok());
  }
  AwaitAll(jobs);
  for (int r = 0; r < 3; ++r) {
    ASSERT_TRUE(jobs[r]->status.ok()) << jobs[r]->status;
    EXPECT_EQ(jobs[r]->result_offset, 2 * r * sizeof(float));
    EXPECT_EQ(jobs[r]->result_bytes, 2 * sizeof(float));
    std::vector<float> block(2);
    std::memcpy(block.data(), jobs[r]->Result().data(), jobs[r]->Result().size());
    EXPECT_EQ(block, (std::vector<float>{6.0f * (2 * r + 1), 6.0f * (2 * r + 2)}))
        << "rank " << r << ": its block of 1+2+3 times the input";
  }
}

TEST(CollectiveExecutor, AScatterLeavesEachRanksBlockOfTheRootsDataWhereItsResultSays) {
  ExecutorRing ring(3);
  std::vector<std::shared_ptr<CollectiveJob>> jobs;
  for (int r = 0; r < 3; ++r) {
    // Only the root's data counts; the others' only gives the ring room.
    const float x = r == 2 ? 1.0f : -7.0f;
    jobs.push_back(
        Job(CollectiveKind::kScatter, "shards", 1, {x, 2 * x, 3 * x, 4 * x, 5 * x, 6 * x}));
    jobs.back()->spec.root = 2;
    jobs.back()->input_left_out = r != 2;
    EXPECT_TRUE(ring.executor(r).Submit(jobs.back()).ok());
  }
  AwaitAll(jobs);
  for (int r = 0; r < 3; ++r) {
    ASSERT_TRUE(jobs[r]->status.ok()) << jobs[r]->status;
    EXPECT_EQ(jobs[r]->result_offset, 2 * r * sizeof(float));
    EXPECT_EQ(jobs[r]->result_bytes, 2 * sizeof(float));
    std::vector<float> block(2);
    std::memcpy(block.data(), jobs[r]->Result().data(), jobs[r]->Result().size());
    EXPECT_EQ(block, (std::vector<float>{2.0f * r + 1, 2.0f * r + 2})) << "rank " << r;
  }
  // A root that left its input out (its rank taken for another's) fails every rank.
  for (int r = 0; r < 3; ++r) {
    jobs[r] = Job(CollectiveKind::kScatter, "shards", 2, {0, 0, 0, 0, 0, 0});
    jobs[r]->spec.root = 0;
    jobs[r]->input_left_out = true;
    EXPECT_TRUE(ring.executor(r).Submit(jobs[r]).ok());
  }
  AwaitAll(jobs);
  for (int r = 0; r < 3; ++r) {
    EXPECT_THAT(std::string(jobs[r]->status.message()),
                HasSubstr("this rank is the scatter's root, but its training process left its "
                          "tensor out"))
        << "rank " << r;
  }
}

TEST(CollectiveExecutor, AGathersResultIsEveryRanksInputAtTheRootAndNothingElsewhere) {
  ExecutorRing ring(3);
  std::vector<std::shared_ptr<CollectiveJob>> jobs;
  for (int r = 0; r < 3; ++r) {
    const float x = static_cast<float>(r + 1);
    jobs.push_back(Job(CollectiveKind::kGather, "ids", 1, {x, 10 * x}));
    jobs.back()->spec.root = 1;
    jobs.back()->output_left_out = r != 1;
    EXPECT_TRUE(ring.executor(r).Submit(jobs.back()).ok());
  }
  AwaitAll(jobs);
  for (int r = 0; r < 3; ++r) {
    ASSERT_TRUE(jobs[r]->status.ok()) << jobs[r]->status;
    EXPECT_EQ(jobs[r]->result_offset, 0u);
    EXPECT_EQ(jobs[r]->result_bytes, r == 1 ? 6 * sizeof(float) : 0) << "rank " << r;
  }
  std::vector<float> result(6);
  ASSERT_EQ(jobs[1]->Result().size(), result.size() * sizeof(float));
  std::memcpy(result.data(), jobs[1]->Result().data(), jobs[1]->Result().size());
  EXPECT_EQ(result, (std::vector<float>{1, 10, 2, 20, 3, 30})) << "every rank's input, in order";
  EXPECT_TRUE(jobs[0]->Result().empty());
  // A root whose client has no output (its rank taken for another's) fails every rank.
  for (int r = 0; r < 3; ++r) {
    jobs[r] = Job(CollectiveKind::kGather, "ids", 2, {0, 0});
    jobs[r]->spec.root = 0;
    jobs[r]->output_left_out = true;
    EXPECT_TRUE(ring.executor(r).Submit(jobs[r]).ok());
  }
  AwaitAll(jobs);
  for (int r = 0; r < 3; ++r) {
    EXPECT_THAT(std::string(jobs[r]->status.message()),
                HasSubstr("this rank is the gather's root, but its training process left its "
                          "output out"))
        << "rank " << r;
  }
}

// An all-to-all has no ring algorithm: on a ring without stride links (these epochs have
// none; a worker's always have them) every rank refuses it at once, and the next
// collective runs.
TEST(CollectiveExecutor, AnAllToAllWithoutStrideLinksFailsOnEveryRankAndTheRingGoesOn) {
  ExecutorRing ring(3);
  std::vector<std::shared_ptr<CollectiveJob>> jobs;
  for (int r = 0; r < 3; ++r) {
    jobs.push_back(Job(CollectiveKind::kAllToAll, "tokens", 1, {1, 2, 3}));
    EXPECT_TRUE(ring.executor(r).Submit(jobs.back()).ok());
  }
  AwaitAll(jobs);
  for (int r = 0; r < 3; ++r) {
    EXPECT_TRUE(absl::IsFailedPrecondition(jobs[r]->status)) << "rank " << r << ": "
                                                             << jobs[r]->status;
    EXPECT_THAT(std::string(jobs[r]->status.message()),
                HasSubstr("an all-to-all runs over the stride links, which this worker's "
                          "transport has not got"));
    jobs[r] = Job(CollectiveKind::kAllReduce, "after", 2, {1});
    EXPECT_TRUE(ring.executor(r).Submit(jobs[r]).ok());
  }
  AwaitAll(jobs);
  for (int r = 0; r < 3; ++r) EXPECT_TRUE(jobs[r]->status.ok()) << jobs[r]->status;
}

TEST(CollectiveExecutor, ABroadcastWhoseRootLeftItsInputOutFailsOnEveryRankBeforeAnyByteMoved) {
  ExecutorRing ring(3);
  std::vector<std::shared_ptr<CollectiveJob>> jobs;
  for (int r = 0; r < 3; ++r) {
    jobs.push_back(Job(CollectiveKind::kBroadcast, "weights", 1, {-1, -1}));
    jobs.back()->spec.root = 1;
    // Rank 1's client took its rank for another's and copied nothing in.
    jobs.back()->input_left_out = r != 0;
    EXPECT_TRUE(ring.executor(r).Submit(jobs.back()).ok());
  }
  AwaitAll(jobs);
  for (int r = 0; r < 3; ++r) {
    EXPECT_FALSE(jobs[r]->status.ok()) << "rank " << r;
    EXPECT_THAT(std::string(jobs[r]->status.message()),
                HasSubstr("this rank is the broadcast's root, but its training process left its "
                          "tensor out"))
        << "rank " << r;
  }
}

TEST(CollectiveExecutor, RunsJobsInTheClientsOrderWhateverOrderTheyArrive) {
  ExecutorRing ring(2);
  std::vector<std::shared_ptr<CollectiveJob>> firsts, seconds;
  for (int r = 0; r < 2; ++r) {
    firsts.push_back(Job(CollectiveKind::kAllReduce, "first", 1, {1}));
    seconds.push_back(Job(CollectiveKind::kAllReduce, "second", 2, {2}));
  }
  // Rank 0's client numbered them, then sent 2 first.
  EXPECT_TRUE(ring.executor(0).Submit(seconds[0]).ok());
  EXPECT_TRUE(ring.executor(0).Submit(firsts[0]).ok());
  EXPECT_TRUE(ring.executor(1).Submit(firsts[1]).ok());
  EXPECT_TRUE(ring.executor(1).Submit(seconds[1]).ok());
  AwaitAll(seconds);
  for (int r = 0; r < 2; ++r) {
    EXPECT_TRUE(firsts[r]->status.ok()) << firsts[r]->status;
    EXPECT_TRUE(seconds[r]->status.ok()) << seconds[r]->status;
    EXPECT_EQ(firsts[r]->spec.sequence, 1u);
    EXPECT_EQ(Floats(*seconds[r]), (std::vector<float>{4}));
  }
}

TEST(CollectiveExecutor, RefusesJobsOfNoAttachedClientAndReusedNumbers) {
  ExecutorRing ring(1);
  auto job = Job(CollectiveKind::kAllReduce, "once", 1, {1});
  EXPECT_TRUE(ring.executor(0).Submit(job).ok());
  ASSERT_TRUE(job->done.WaitForNotificationWithTimeout(kWait));
  EXPECT_TRUE(job->status.ok()) << job->status;

  auto again = Job(CollectiveKind::kAllReduce, "twice", 1, {1});
  EXPECT_FALSE(ring.executor(0).Submit(again).ok());
  ASSERT_TRUE(again->done.HasBeenNotified()) << "refused at once";
  EXPECT_TRUE(absl::IsInvalidArgument(again->status));
  EXPECT_THAT(std::string(again->status.message()), HasSubstr("client_sequence 1 was used"));

  EXPECT_FALSE(ring.executor(0).Attach()) << "one client at a time";
  ring.executor(0).Detach(absl::AbortedError("the client left"));
  auto detached = Job(CollectiveKind::kAllReduce, "late", 2, {1});
  EXPECT_FALSE(ring.executor(0).Submit(detached).ok());
  EXPECT_TRUE(absl::IsFailedPrecondition(detached->status));
  EXPECT_THAT(std::string(detached->status.message()), HasSubstr("not attached"));
}

TEST(CollectiveExecutor, AClientThatGoesAwayAbortsTheCollectiveOnEveryRankNamingIt) {
  ExecutorRing ring(3);
  std::vector<std::shared_ptr<CollectiveJob>> jobs;
  for (int r = 0; r < 3; ++r) jobs.push_back(Job(CollectiveKind::kAllReduce, "grad", 1, {1, 2}));
  jobs[1]->client_gone.Cancel(absl::AbortedError("the training process of w1 disconnected"));
  for (int r = 0; r < 3; ++r) EXPECT_TRUE(ring.executor(r).Submit(jobs[r]).ok());
  AwaitAll(jobs);
  for (int r = 0; r < 3; ++r) {
    EXPECT_FALSE(jobs[r]->status.ok()) << "rank " << r;
    EXPECT_THAT(std::string(jobs[r]->status.message()), HasSubstr("w1 disconnected"))
        << "rank " << r << ": " << jobs[r]->status;
    EXPECT_EQ(ring.executor(r).counters().failed, 1u);
  }
}

TEST(CollectiveExecutor, ARefusedRequestFailsItsCollectiveOnEveryRankAtOnceAndTheNextOneRuns) {
  ExecutorRing ring(3);
  std::vector<std::shared_ptr<CollectiveJob>> refused, next;
  for (int r = 0; r < 3; ++r) {
    refused.push_back(Job(CollectiveKind::kAllReduce, "grad", 1, {1, 2}));
    refused.back()->deadline = SteadyDeadline(absl::Seconds(60));  // far: failing must not wait
    next.push_back(Job(CollectiveKind::kAllReduce, "grad2", 2, {1, 2}));
  }
  refused[1]->refusal = absl::InvalidArgumentError(
      "worker w1 refused its client's request: invalid inline_data: 5 bytes for 2 x float32 (8 "
      "expected)");
  for (int r = 0; r < 3; ++r) {
    EXPECT_TRUE(ring.executor(r).Submit(refused[r]).ok());
    EXPECT_TRUE(ring.executor(r).Submit(next[r]).ok());
  }
  AwaitAll(next);
  for (int r = 0; r < 3; ++r) {
    SCOPED_TRACE(absl::StrCat("rank ", r));
    EXPECT_FALSE(refused[r]->status.ok());
    EXPECT_THAT(std::string(refused[r]->status.message()),
                HasSubstr("worker w1 refused its client's request: invalid inline_data"))
        << refused[r]->status;
    EXPECT_THAT(std::string(refused[r]->status.message()), HasSubstr("collective #1 'grad'"));
    EXPECT_TRUE(next[r]->status.ok()) << "the refusal consumed its turn: " << next[r]->status;
    EXPECT_EQ(next[r]->spec.sequence, 2u);
    EXPECT_EQ(Floats(*next[r]), (std::vector<float>{3, 6}));
  }
  EXPECT_TRUE(absl::IsInvalidArgument(refused[1]->status)) << "the refusing rank keeps the code";
}

TEST(CollectiveExecutor, ARankWhoseClientLeftFailsTheRingsNextCollectiveEverywhereAtOnce) {
  ExecutorRing ring(3);
  ring.executor(1).Detach(absl::AbortedError("the training process left"));
  absl::SleepFor(absl::Milliseconds(150));  // past the re-attach grace
  std::vector<std::shared_ptr<CollectiveJob>> jobs;
  for (int r : {0, 2}) {
    jobs.push_back(Job(CollectiveKind::kAllReduce, "grad", 1, {1}));
    jobs.back()->deadline = SteadyDeadline(absl::Seconds(60));  // far: failing must not wait
    EXPECT_TRUE(ring.executor(r).Submit(jobs.back()).ok());
  }
  AwaitAll(jobs);
  for (const auto& job : jobs) {
    EXPECT_TRUE(absl::IsAborted(job->status)) << job->status;
    EXPECT_THAT(std::string(job->status.message()),
                HasSubstr("rank 1 gave up: worker w1 has no training process attached"))
        << job->status;
  }
  // Rank 1 counts its failure after telling the ring, so possibly after the others finished.
  for (const SteadyDeadline until(absl::Seconds(5));
       ring.executor(1).counters().failed == 0 && !until.Passed();) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  EXPECT_EQ(ring.executor(1).counters().failed, 1u);

  // A new client carries on with the ring's next collective.
  ASSERT_TRUE(ring.executor(1).Attach());
  jobs.clear();
  for (int r = 0; r < 3; ++r) {
    jobs.push_back(Job(CollectiveKind::kAllReduce, "grad", r == 1 ? 1 : 2, {1}));
    EXPECT_TRUE(ring.executor(r).Submit(jobs.back()).ok());
  }
  AwaitAll(jobs);
  for (const auto& job : jobs) {
    EXPECT_TRUE(job->status.ok()) << job->status;
    EXPECT_EQ(job->spec.sequence, 2u);
  }
}

TEST(CollectiveExecutor, AfterAClientThatSaidGoodbyeTheRingsCollectivesWaitForTheNextOne) {
  ExecutorRing ring(2);
  ring.executor(1).ExpectCleanDetach();
  ring.executor(1).Detach(absl::AbortedError("the training process finished"));
  absl::SleepFor(absl::Milliseconds(150));  // past the re-attach grace, which does not apply
  auto waiting = Job(CollectiveKind::kAllReduce, "job2", 1, {1});
  EXPECT_TRUE(ring.executor(0).Submit(waiting).ok());
  absl::SleepFor(absl::Milliseconds(150));
  EXPECT_FALSE(waiting->done.HasBeenNotified()) << "held for rank 1's next training process";
  ASSERT_TRUE(ring.executor(1).Attach());
  auto joined = Job(CollectiveKind::kAllReduce, "job2", 1, {2});
  EXPECT_TRUE(ring.executor(1).Submit(joined).ok());
  AwaitAll({waiting, joined});
  EXPECT_TRUE(waiting->status.ok()) << waiting->status;
  EXPECT_EQ(Floats(*waiting), (std::vector<float>{3}));
}

TEST(CollectiveExecutor, ANewJobRunsAfterOneRankOfThePreviousIssuedACollectiveTheOthersDidNot) {
  ExecutorRing ring(3);
  std::vector<std::shared_ptr<CollectiveJob>> jobs;
  for (int r = 0; r < 3; ++r) {
    jobs.push_back(Job(CollectiveKind::kAllReduce, "step", 1, {1}));
    EXPECT_TRUE(ring.executor(r).Submit(jobs.back()).ok());
  }
  AwaitAll(jobs);
  // Rank 2's trainer issues one collective more, alone; it times out.
  auto extra = Job(CollectiveKind::kAllReduce, "extra", 2, {1});
  extra->deadline = SteadyDeadline(absl::Milliseconds(300));
  EXPECT_TRUE(ring.executor(2).Submit(extra).ok());
  AwaitAll({extra});
  EXPECT_FALSE(extra->status.ok());
  // The job ends; a new one starts on every rank.
  for (int r = 0; r < 3; ++r) {
    ring.executor(r).ExpectCleanDetach();
    ring.executor(r).Detach(absl::AbortedError("job done"));
  }
  absl::SleepFor(absl::Milliseconds(100));
  for (int r = 0; r < 3; ++r) ASSERT_TRUE(ring.executor(r).Attach());
  for (int round = 0; round < 2; ++round) {
    jobs.clear();
    for (int r = 0; r < 3; ++r) {
      jobs.push_back(Job(CollectiveKind::kAllReduce, "job2", round + 1, {1}));
      EXPECT_TRUE(ring.executor(r).Submit(jobs.back()).ok());
    }
    AwaitAll(jobs);
    for (int r = 0; r < 3; ++r) {
      EXPECT_TRUE(jobs[r]->status.ok()) << "round " << round << " rank " << r << ": "
                                        << jobs[r]->status;
    }
  }
}

TEST(CollectiveExecutor, ALostFrameFailsTheCollectiveAtItsDeadlineNotLater) {
  ExecutorRing ring(2);
  ring.link(0).Script(0, LinkFault::Drop());  // rank 0's first frame never arrives
  std::vector<std::shared_ptr<CollectiveJob>> jobs;
  for (int r = 0; r < 2; ++r) {
    jobs.push_back(Job(CollectiveKind::kAllReduce, "grad", 1, {1, 2}));
    jobs.back()->deadline = SteadyDeadline(absl::Seconds(1));
    EXPECT_TRUE(ring.executor(r).Submit(jobs.back()).ok());
  }
  AwaitAll(jobs);
  for (int r = 0; r < 2; ++r) {
    EXPECT_FALSE(jobs[r]->status.ok()) << "rank " << r;
    EXPECT_THAT(std::string(jobs[r]->status.message()), HasSubstr("collective #1 'grad'"))
        << jobs[r]->status;
  }
}

TEST(CollectiveExecutor, ACollectiveWithoutARingFailsNamingItAndTheReason) {
  ExecutorRing ring(1);
  ring.epochs(0).fail_with = absl::UnavailableError("the ring dissolved: w3 was lost");
  auto job = Job(CollectiveKind::kAllReduce, "grad/fc1", 1, {1});
  EXPECT_TRUE(ring.executor(0).Submit(job).ok());
  ASSERT_TRUE(job->done.WaitForNotificationWithTimeout(kWait));
  EXPECT_TRUE(absl::IsUnavailable(job->status));
  EXPECT_EQ(job->status.message(),
            "collective 'grad/fc1' (client collective 1): no ring to run on: the ring "
            "dissolved: w3 was lost");
}

TEST(CollectiveExecutor, TellsTheRpcWhenAJobIsDone) {
  ExecutorRing ring(1);
  auto job = Job(CollectiveKind::kAllReduce, "grad", 1, {1});
  absl::Notification answered;
  job->on_done = [&] {
    EXPECT_TRUE(job->status.ok());
    EXPECT_FALSE(job->done.HasBeenNotified()) << "the answer comes first";
    answered.Notify();
  };
  EXPECT_TRUE(ring.executor(0).Submit(job).ok());
  EXPECT_TRUE(answered.WaitForNotificationWithTimeout(kWait));
}

TEST(CollectiveExecutor, ASubmitterThatFindsItIdleRunsTheJobItselfAndReturnsWithItFinished) {
  ExecutorRing ring(3);
  constexpr int kRounds = 5;
  std::vector<int> ran_here(3, 0);
  std::vector<std::vector<std::shared_ptr<CollectiveJob>>> jobs(3);
  std::vector<std::thread> clients;
  for (int r = 0; r < 3; ++r) {
    clients.emplace_back([&, r] {
      for (uint64_t sequence = 1; sequence <= kRounds; ++sequence) {
        auto job = Job(CollectiveKind::kAllReduce, "grad", sequence, {static_cast<float>(r)});
        jobs[r].push_back(job);
        const std::thread::id submitter = std::this_thread::get_id();
        job->on_done = [&ran_here, r, submitter] {
          if (std::this_thread::get_id() == submitter) ++ran_here[r];
        };
        EXPECT_TRUE(ring.executor(r).SubmitAndRunIfIdle(job).ok());
        // Run here, it has finished; handed to the executor's thread (which held the
        // turn for a moment, looking after the idle ring), it finishes there.
        ASSERT_TRUE(job->done.WaitForNotificationWithTimeout(kWait));
      }
    });
  }
  for (std::thread& client : clients) client.join();
  for (int r = 0; r < 3; ++r) {
    SCOPED_TRACE(absl::StrCat("rank ", r));
    for (const auto& job : jobs[r]) {
      EXPECT_TRUE(job->status.ok()) << job->status;
      EXPECT_EQ(Floats(*job), (std::vector<float>{3}));
    }
    EXPECT_GE(ran_here[r], kRounds - 1) << "no hand-off to another thread when it is idle";
    EXPECT_EQ(ring.executor(r).counters().completed, static_cast<uint64_t>(kRounds));
  }
}

TEST(CollectiveExecutor, ASubmitterThatFindsAJobRunningLeavesItsOwnToTheExecutorInOrder) {
  ExecutorRing ring(2);
  auto first = Job(CollectiveKind::kAllReduce, "first", 1, {1});
  auto second = Job(CollectiveKind::kAllReduce, "second", 2, {2});
  // It runs on the executor's thread, waiting for rank 1.
  EXPECT_TRUE(ring.executor(0).Submit(first).ok());
  EXPECT_TRUE(ring.executor(0).SubmitAndRunIfIdle(second).ok());
  EXPECT_FALSE(second->done.HasBeenNotified()) << "queued behind the first, not run here";
  for (uint64_t sequence : {1, 2}) {
    auto peer = Job(CollectiveKind::kAllReduce, sequence == 1 ? "first" : "second", sequence,
                    {static_cast<float>(10 * sequence)});
    EXPECT_TRUE(ring.executor(1).SubmitAndRunIfIdle(peer).ok());
    ASSERT_TRUE(peer->done.WaitForNotificationWithTimeout(kWait));
    EXPECT_TRUE(peer->status.ok()) << peer->status;
  }
  AwaitAll({first, second});
  EXPECT_EQ(Floats(*first), (std::vector<float>{11}));
  EXPECT_EQ(Floats(*second), (std::vector<float>{22}));
}

TEST(CollectiveExecutor, AMembershipChangeFailsTheCollectivesInFlightAndQueuedOnEveryRankMarked) {
  ExecutorRing ring(3);
  std::vector<std::shared_ptr<CollectiveJob>> in_flight, queued;
  for (int r = 0; r < 3; ++r) {
    // Client collectives 2 and 3 wait behind 1, which only ranks 0 and 1 have sent: it
    // runs there, waiting for rank 2.
    for (uint64_t sequence : {2, 3}) {
      queued.push_back(Job(CollectiveKind::kAllReduce, absl::StrCat("step", sequence), sequence, {1}));
      queued.back()->queued = SteadyStopwatch();
      EXPECT_TRUE(ring.executor(r).Submit(queued.back()).ok());
    }
    in_flight.push_back(Job(CollectiveKind::kAllReduce, "grad", 1, {1, 2}));
    if (r < 2) {
      EXPECT_TRUE(ring.executor(r).Submit(in_flight.back()).ok());
    }
  }
  absl::SleepFor(absl::Milliseconds(100));  // ranks 0 and 1 are inside the ring algorithm
  MembershipChange change{.from_generation = 5, .from_size = 3, .to_generation = 7,
                          .to_size = 2, .left = {"w2"}, .joined = {}, .reason = ""};
  for (int r = 0; r < 3; ++r) {
    ring.epochs(r).ChangeMembership(MembershipSnapshot{7, change},
                                    absl::AbortedError("generation 5 ended: generation 7 replaced it"));
  }
  in_flight[2]->membership = 0;  // its client issued it before it heard of the change
  EXPECT_TRUE(ring.executor(2).Submit(in_flight[2]).ok());
  AwaitAll(in_flight);
  AwaitAll(queued);
  for (const auto& job : in_flight) {
    EXPECT_TRUE(absl::IsAborted(job->status)) << job->status;
    EXPECT_TRUE(OutcomeMarkOf(job->status) == OutcomeMark::kMembershipChanged) << job->status;
    EXPECT_THAT(std::string(job->status.message()),
                HasSubstr("generation 5 (3 workers) -> generation 7 (2 workers): w2 left"));
    EXPECT_EQ(job->membership_now, 7u) << "the membership the client names next";
    EXPECT_EQ(Floats(*job), (std::vector<float>{1, 2})) << "the data is untouched";
  }
  for (const auto& job : queued) {
    EXPECT_TRUE(OutcomeMarkOf(job->status) == OutcomeMark::kMembershipChanged) << job->status;
    EXPECT_THAT(std::string(job->status.message()), HasSubstr("did not run"));
    EXPECT_EQ(job->stats.bytes_sent, 0u) << "no turn on any ring";
  }
}

// Input that arrives when the test says so, recording each range the collective awaited.
class ScriptedArrival final : public InputArrival {
 public:
  void Arrive() {
    absl::MutexLock lock(&mu_);
    arrived_ = true;
  }
  absl::Status AwaitBytes(size_t offset, size_t size, const WaitLimit& limit) const override {
    absl::MutexLock lock(&mu_);
    awaited_.push_back({offset, offset + size});
    return AwaitWithLimit(mu_, absl::Condition(&arrived_), limit, "the test's input did not arrive");
  }
  std::vector<std::pair<size_t, size_t>> awaited() const {
    absl::MutexLock lock(&mu_);
    return awaited_;
  }

 private:
  mutable absl::Mutex mu_;
  bool arrived_ ABSL_GUARDED_BY(mu_) = false;
  mutable std::vector<std::pair<size_t, size_t>> awaited_ ABSL_GUARDED_BY(mu_);
};

// Three ranks all-reduce {r, r + 1, ...} (`count` floats), each job's input arriving
// through `arrivals[r]`; returns the jobs once done.
std::vector<std::shared_ptr<CollectiveJob>> SumWhileArriving(
    ExecutorRing& ring, std::vector<std::shared_ptr<ScriptedArrival>>& arrivals, size_t count,
    absl::Duration timeout = kWait, CollectiveKind kind = CollectiveKind::kAllReduce) {
  std::vector<std::shared_ptr<CollectiveJob>> jobs;
  for (int r = 0; r < 3; ++r) {
    std::vector<float> data(count);
    for (size_t i = 0; i < count; ++i) data[i] = static_cast<float>(r + i);
    jobs.push_back(Job(kind, "arriving", 1, data));
    jobs.back()->deadline = SteadyDeadline(timeout);
    jobs.back()->arrival = arrivals[r];
    EXPECT_TRUE(ring.executor(r).Submit(jobs.back()).ok());
  }
  return jobs;
}

std::vector<std::shared_ptr<ScriptedArrival>> ThreeArrivals() {
  return {std::make_shared<ScriptedArrival>(), std::make_shared<ScriptedArrival>(),
          std::make_shared<ScriptedArrival>()};
}

void ExpectTheSum(const std::vector<std::shared_ptr<CollectiveJob>>& jobs, size_t count) {
  for (const auto& job : jobs) {
    ASSERT_TRUE(job->status.ok()) << job->status;
    const std::vector<float> sum = Floats(*job);
    for (size_t i = 0; i < count; ++i) ASSERT_EQ(sum[i], static_cast<float>(3 * i + 3)) << i;
  }
}

// Every range awaited before it is read, none read unawaited (`ranges` sorted).
void ExpectEveryByteAwaited(std::vector<std::pair<size_t, size_t>> ranges, size_t bytes) {
  std::sort(ranges.begin(), ranges.end());
  size_t covered = 0;
  for (const auto& [begin, end] : ranges) {
    EXPECT_LE(begin, covered) << "a gap: bytes read that were never awaited";
    covered = std::max(covered, end);
  }
  EXPECT_EQ(covered, bytes);
}

TEST(CollectiveExecutor, AnAllReduceThatIsNotTheRingAwaitsItsWholeInputBeforeItRuns) {
  ExecutorRing ring(3);  // small tensors relay
  std::vector<std::shared_ptr<ScriptedArrival>> arrivals = ThreeArrivals();
  const std::vector<std::shared_ptr<CollectiveJob>> jobs = SumWhileArriving(ring, arrivals, 5);
  absl::SleepFor(absl::Milliseconds(50));
  for (const auto& job : jobs) EXPECT_FALSE(job->done.HasBeenNotified()) << "ran before its input";
  for (const auto& arrival : arrivals) arrival->Arrive();
  AwaitAll(jobs);
  ExpectTheSum(jobs, 5);
  for (const auto& arrival : arrivals) {
    EXPECT_EQ(arrival->awaited(), (std::vector<std::pair<size_t, size_t>>{{0, 5 * sizeof(float)}}));
  }
  // The wait is the job's (ringsync_input_wait_seconds_total), kept beside the relay's stats.
  for (const auto& job : jobs) EXPECT_GT(job->stats.input_wait, absl::ZeroDuration());
}

TEST(CollectiveExecutor, TheRingAwaitsItsInputRangeByRangeWhereItReadsIt) {
  ExecutorRing ring(3, AlgorithmPolicy{.mode = AlgorithmPolicy::Mode::kRing});
  std::vector<std::shared_ptr<ScriptedArrival>> arrivals = ThreeArrivals();
  for (const auto& arrival : arrivals) arrival->Arrive();
  const std::vector<std::shared_ptr<CollectiveJob>> jobs = SumWhileArriving(ring, arrivals, 300);
  AwaitAll(jobs);
  ExpectTheSum(jobs, 300);
  for (const auto& arrival : arrivals) {
    const std::vector<std::pair<size_t, size_t>> ranges = arrival->awaited();
    EXPECT_GT(ranges.size(), 3u) << "segment by segment (64-byte segments)";
    ExpectEveryByteAwaited(ranges, 300 * sizeof(float));
  }
}

TEST(CollectiveExecutor, AReduceScatterAwaitsItsInputRangeByRangeAsTheRingAllReduceDoes) {
  ExecutorRing ring(3);
  std::vector<std::shared_ptr<ScriptedArrival>> arrivals = ThreeArrivals();
  const std::vector<std::shared_ptr<CollectiveJob>> jobs =
      SumWhileArriving(ring, arrivals, 300, kWait, CollectiveKind::kReduceScatter);
  absl::SleepFor(absl::Milliseconds(50));
  for (const auto& job : jobs) EXPECT_FALSE(job->done.HasBeenNotified()) << "ran before its input";
  for (const auto& arrival : arrivals) arrival->Arrive();
  AwaitAll(jobs);
  for (int r = 0; r < 3; ++r) {
    const CollectiveJob& job = *jobs[r];
    ASSERT_TRUE(job.status.ok()) << job.status;
    EXPECT_EQ(job.result_offset, r * 100 * sizeof(float));
    const std::vector<float> buffer = Floats(job);
    for (size_t i = r * 100; i < (r + 1) * 100u; ++i) {
      ASSERT_EQ(buffer[i], static_cast<float>(3 * i + 3)) << "rank " << r << ", element " << i;
    }
    const std::vector<std::pair<size_t, size_t>> ranges = arrivals[r]->awaited();
    EXPECT_GT(ranges.size(), 3u) << "segment by segment (64-byte segments)";
    ExpectEveryByteAwaited(ranges, 300 * sizeof(float));
    EXPECT_GT(job.stats.input_wait, absl::ZeroDuration());
  }
}

TEST(CollectiveExecutor, InputThatNeverArrivesFailsEveryRankByTheDeadlineNamingTheWait) {
  for (const AlgorithmPolicy::Mode mode : {AlgorithmPolicy::Mode::kRing, AlgorithmPolicy::Mode::kRelay}) {
    ExecutorRing ring(3, AlgorithmPolicy{.mode = mode});
    std::vector<std::shared_ptr<ScriptedArrival>> arrivals = ThreeArrivals();
    arrivals[0]->Arrive();
    arrivals[2]->Arrive();
    const std::vector<std::shared_ptr<CollectiveJob>> jobs =
        SumWhileArriving(ring, arrivals, 100, absl::Seconds(1));
    AwaitAll(jobs);
    for (const auto& job : jobs) EXPECT_FALSE(job->status.ok());
    EXPECT_THAT(std::string(jobs[1]->status.message()),
                HasSubstr("the test's input did not arrive"));
    EXPECT_THAT(std::string(jobs[1]->status.message()), HasSubstr("rank 1 (generation 5"));
  }
}

}  // namespace
}  // namespace ringsync
