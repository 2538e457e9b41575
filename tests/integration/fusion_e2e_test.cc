// End to end: many tensors all-reduced as one collective — the grouped call
// (Client::AllReduceGroup) and async fusion (ClientOptions::fusion) — on real workers.
#include <memory>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "tests/integration/cluster_fixture.h"

namespace ringsync {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using testing::ConnectAll;
using testing::ExpectAllOk;
using testing::OnEveryRank;
using testing::StartCluster;

// Tensor k on rank r holds r + k + i/1000 at index i: every element's sum is distinct.
std::vector<std::vector<float>> Tensors(int r, const std::vector<size_t>& sizes) {
  std::vector<std::vector<float>> tensors;
  for (size_t k = 0; k < sizes.size(); ++k) {
    std::vector<float>& t = tensors.emplace_back(sizes[k]);
    for (size_t i = 0; i < t.size(); ++i) t[i] = static_cast<float>(r + k) + (i % 1000) / 1000.0f;
  }
  return tensors;
}

std::vector<GroupTensor> Group(std::vector<std::vector<float>>& tensors) {
  std::vector<GroupTensor> group;
  for (size_t k = 0; k < tensors.size(); ++k) {
    group.push_back(GroupTensor::Of(absl::StrCat("layer", k, ".weight"),
                                    absl::MakeSpan(tensors[k])));
  }
  return group;
}

absl::Status ExpectSums(int world, const std::vector<std::vector<float>>& tensors) {
  for (size_t k = 0; k < tensors.size(); ++k) {
    std::vector<std::vector<float>> each;
    for (int r = 0; r < world; ++r) each.push_back(Tensors(r, {tensors[k].size()})[0]);
    for (size_t i = 0; i < tensors[k].size(); ++i) {
      float sum = 0;
      for (int r = 0; r < world; ++r) sum += each[r][i] + static_cast<float>(k);
      if (std::abs(tensors[k][i] - sum) > 1e-3f * std::abs(sum)) {
        return absl::InternalError(absl::StrCat("tensor ", k, "[", i, "] = ", tensors[k][i],
                                                ", expected ", sum));
      }
    }
  }
  return absl::OkStatus();
}

TEST(GroupedAllReduce, EachTensorGetsItsOwnSumInlineAndThroughSharedMemory) {
  auto cluster = StartCluster(3);
  ASSERT_NE(cluster, nullptr);
  auto clients = ConnectAll(*cluster);
  // 5 + 0 + 1 + 1000 floats go inline; with a 600k-float tensor the group is > 1 MiB.
  for (const std::vector<size_t>& sizes :
       {std::vector<size_t>{5, 0, 1, 1000}, std::vector<size_t>{7, 600000, 0, 3}}) {
    ExpectAllOk(OnEveryRank(clients, [&](int r, Client& c) -> absl::Status {
      std::vector<std::vector<float>> tensors = Tensors(r, sizes);
      for (int step = 0; step < 2; ++step) {  // the second reuses the shared-memory file
        tensors = Tensors(r, sizes);
        if (absl::Status s = c.AllReduceGroup(Group(tensors), ReduceOp::kSum); !s.ok()) return s;
        if (absl::Status s = ExpectSums(3, tensors); !s.ok()) return s;
      }
      return absl::OkStatus();
    }));
  }
}

TEST(GroupedAllReduce, AMismatchNamesTheTensorOnEveryRankAndLeavesEveryTensorAsItWas) {
  auto cluster = StartCluster(3);
  ASSERT_NE(cluster, nullptr);
  auto clients = ConnectAll(*cluster);
  const std::vector<size_t> sizes = {4, 300000, 6};
  std::vector<absl::Status> statuses = OnEveryRank(clients, [&](int r, Client& c) {
    std::vector<std::vector<float>> tensors = Tensors(r, sizes);
    std::vector<GroupTensor> group = Group(tensors);
    if (r == 1) group[2].name = "layer2.bias";  // rank 1 lists another tensor third
    absl::Status s = c.AllReduceGroup(group, ReduceOp::kSum);
    if (tensors != Tensors(r, sizes)) return absl::InternalError("a tensor was touched");
    return s;
  });
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(statuses[r].code(), absl::StatusCode::kFailedPrecondition) << statuses[r];
    EXPECT_THAT(std::string(statuses[r].message()),
                AllOf(HasSubstr("tensor #2 differs"), HasSubstr("'layer2.bias' (6 x float32)"),
                      HasSubstr("'layer2.weight' (6 x float32)")))
        << "rank " << r;
  }
  // A tensor more on one rank: the list's end is named.
  statuses = OnEveryRank(clients, [&](int r, Client& c) {
    std::vector<std::vector<float>> tensors = Tensors(r, r == 2 ? std::vector<size_t>{4, 5, 6, 7}
                                                                : std::vector<size_t>{4, 5, 6});
    return c.AllReduceGroup(Group(tensors), ReduceOp::kSum);
  });
  for (int r = 0; r < 3; ++r) {
    EXPECT_THAT(std::string(statuses[r].message()),
                AllOf(HasSubstr("tensor #3 differs"), HasSubstr("'layer3.weight' (7 x float32)"),
                      HasSubstr("no tensor #3 (its fused all-reduce holds 3)")))
        << "rank " << r;
  }
  // The ring goes on.
  ExpectAllOk(OnEveryRank(clients, [&](int r, Client& c) -> absl::Status {
    std::vector<std::vector<float>> tensors = Tensors(r, sizes);
    if (absl::Status s = c.AllReduceGroup(Group(tensors), ReduceOp::kSum); !s.ok()) return s;
    return ExpectSums(3, tensors);
  }));
}

TEST(GroupedAllReduce, ABadTensorIsRefusedNamingItAndTheOtherRanksFailToo) {
  auto cluster = StartCluster(2);
  ASSERT_NE(cluster, nullptr);
  auto clients = ConnectAll(*cluster);
  std::vector<absl::Status> statuses = OnEveryRank(clients, [&](int r, Client& c) {
    std::vector<std::vector<float>> tensors = Tensors(r, {3, 3});
    std::vector<double> other(3, 1.0);
    std::vector<GroupTensor> group = Group(tensors);
    if (r == 0) group.push_back(GroupTensor::Of("head.scale", absl::MakeSpan(other)));
    return c.AllReduceGroup(group, ReduceOp::kSum, {.timeout = absl::Seconds(20)});
  });
  EXPECT_EQ(statuses[0].code(), absl::StatusCode::kInvalidArgument) << statuses[0];
  EXPECT_THAT(std::string(statuses[0].message()),
              HasSubstr("tensor #2 'head.scale' is float64 where tensor #0 is float32"));
  EXPECT_FALSE(statuses[1].ok());
  EXPECT_NE(statuses[1].code(), absl::StatusCode::kDeadlineExceeded) << statuses[1];
}

std::vector<std::unique_ptr<Client>> ConnectFused(LocalCluster& cluster, size_t threshold_bytes,
                                                  absl::Duration cycle_time) {
  std::vector<std::unique_ptr<Client>> clients(cluster.world_size());
  std::vector<std::jthread> threads;
  for (int r = 0; r < cluster.world_size(); ++r) {
    threads.emplace_back([&, r] {
      ClientOptions options;
      options.connect_timeout = absl::Seconds(30);
      options.fusion = {.enabled = true, .threshold_bytes = threshold_bytes, .cycle_time = cycle_time};
      absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(cluster.worker_target(r), options);
      if (client.ok()) clients[r] = *std::move(client);
      else ADD_FAILURE() << "rank " << r << ": " << client.status();
    });
  }
  return clients;
}

TEST(AsyncFusion, EveryHandleGetsItsOwnSumEvenWhenRanksCycleAtDifferentMoments) {
  auto cluster = StartCluster(3);
  ASSERT_NE(cluster, nullptr);
  // 64 KiB batches; a 1 ms cycle time, and rank 0 pauses now and then while it issues,
  // so its clock sends batches the others cut elsewhere: they must be sent again alike.
  auto clients = ConnectFused(*cluster, 64 << 10, absl::Milliseconds(1));
  std::vector<size_t> sizes;
  for (size_t k = 0; k < 40; ++k) sizes.push_back(k == 20 ? 20000 : 10 + 37 * k);  // one alone
  ExpectAllOk(OnEveryRank(clients, [&](int r, Client& c) -> absl::Status {
    for (int step = 0; step < 3; ++step) {
      std::vector<std::vector<float>> tensors = Tensors(r, sizes);
      std::vector<CollectiveHandle> handles;
      for (size_t k = 0; k < tensors.size(); ++k) {
        // Long enough for the batch in flight to complete and the cycle time to pass.
        if ((r == 0 && k % 7 == 3) || (r == 1 && k % 11 == 5)) absl::SleepFor(absl::Milliseconds(30));
        handles.push_back(c.AllReduceAsync(absl::StrCat("layer", k, ".weight"),
                                           absl::MakeSpan(tensors[k]), ReduceOp::kSum));
      }
      if (absl::Status s = c.Barrier("not fusible"); !s.ok()) return s;  // ends a batch too
      for (CollectiveHandle& h : handles) {
        if (absl::Status s = h.Wait(); !s.ok()) return s;
      }
      if (absl::Status s = ExpectSums(3, tensors); !s.ok()) return s;
    }
    return absl::OkStatus();
  }));
}

TEST(AsyncFusion, AMismatchInABatchFailsEveryHandleNamingTheTensor) {
  auto cluster = StartCluster(2);
  ASSERT_NE(cluster, nullptr);
  auto clients = ConnectFused(*cluster, 1 << 20, absl::Hours(1));
  std::vector<absl::Status> statuses = OnEveryRank(clients, [&](int r, Client& c) {
    std::vector<std::vector<float>> tensors = Tensors(r, {3, 4, 5});
    std::vector<CollectiveHandle> handles;
    for (size_t k = 0; k < tensors.size(); ++k) {
      const std::string name = r == 1 && k == 1 ? "renamed" : absl::StrCat("layer", k, ".weight");
      handles.push_back(c.AllReduceAsync(name, absl::MakeSpan(tensors[k]), ReduceOp::kSum));
    }
    absl::Status first = handles[0].Wait();
    for (CollectiveHandle& h : handles) {
      if (h.Wait().ok()) return absl::InternalError("a handle completed OK");
    }
    if (tensors != Tensors(r, {3, 4, 5})) return absl::InternalError("a tensor was touched");
    return first;
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(statuses[r].code(), absl::StatusCode::kFailedPrecondition) << statuses[r];
    EXPECT_THAT(std::string(statuses[r].message()),
                AllOf(HasSubstr("tensor 'layer0.weight' (#0 of 3 fused into one all-reduce)"),
                      HasSubstr("tensor #1 differs"), HasSubstr("'renamed' (4 x float32)")))
        << "rank " << r;
  }
}

}  // namespace
}  // namespace ringsync
