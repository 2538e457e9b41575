// Specification of the large scatters and gathers straight between the root and each
// rank over stride links: every rank ends with what the ring's chain gives it, in the
// same buffer layout, for every ring size, root and size, over either schedule of the
// agreement; the root moves what the chain's root moves and every other rank one block;
// ranks that disagree fail with their buffers untouched; a fault at any frame never
// leaves one rank OK and another plainly failed; a rank blocked sending to a root that
// gave up is freed by the root's notice, not by its deadline; and the choice follows the
// policy.
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/link/faulty_link.h"
#include "core/link/memory_link.h"
#include "core/outcome.h"
#include "core/ring/direct_transfer.h"
#include "core/ring/stride_copying.h"
#include "core/sync/steady_stopwatch.h"
#include "core/testing/links_with_fault.h"
#include "core/testing/ring_specs.h"
#include "core/testing/ring_test_data.h"
#include "core/testing/spawn_ranks.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringsync {
namespace {

using ::testing::HasSubstr;
using testing::LinksWithFault;
using testing::Bytes;
using testing::Spec;

constexpr std::byte kUntouched{0xEE};

struct TransferRun {
  std::vector<absl::Status> statuses;
  std::vector<Bytes> buffers;
  std::vector<RingStats> stats;
  std::vector<absl::Duration> took;
};

// Rank r's buffer: a gather's N slots with rank r's input first (the rest kUntouched), an
// uneven all-to-all's input and then its result (kUntouched), a scatter's or an even
// all-to-all's spec.count elements of rank r's input.
Bytes BufferOf(const CollectiveSpec& spec, int n, int r) {
  const Bytes input = testing::RandomInput(spec.dtype, spec.count, r, 17);
  if (spec.kind != CollectiveKind::kGather && !HasUnevenBlocks(spec)) return input;
  const size_t elements = HasUnevenBlocks(spec) ? *WorkingElements(spec, n)
                                                : spec.count * static_cast<size_t>(n);
  Bytes buffer(elements * DTypeSize(spec.dtype), kUntouched);
  std::copy(input.begin(), input.end(), buffer.begin());
  return buffer;
}

// Rank r's spec of an uneven all-to-all in which rank q sends sizes[q][r] elements to
// rank r.
CollectiveSpec UnevenSpec(const std::vector<std::vector<uint64_t>>& sizes, int r) {
  CollectiveSpec spec = Spec(CollectiveKind::kAllToAll, DType::kFloat32, 0);
  for (size_t q = 0; q < sizes.size(); ++q) {
    spec.send_counts.push_back(sizes[static_cast<size_t>(r)][q]);
    spec.receive_counts.push_back(sizes[q][static_cast<size_t>(r)]);
    spec.count += sizes[static_cast<size_t>(r)][q];
  }
  return spec;
}

// Where rank q's block r begins in its input, in elements.
uint64_t SendOffset(const std::vector<std::vector<uint64_t>>& sizes, size_t q, size_t r) {
  uint64_t offset = 0;
  for (size_t i = 0; i < r; ++i) offset += sizes[q][i];
  return offset;
}

Bytes Slice(const Bytes& b, size_t at, size_t size) {
  return Bytes(b.begin() + static_cast<ptrdiff_t>(at),
               b.begin() + static_cast<ptrdiff_t>(at + size));
}

// Runs rank r over `links_of(r)` with `specs[r]`.
template <typename LinksOf>
TransferRun RunTransfer(StrideSchedule schedule, int n, const std::vector<CollectiveSpec>& specs,
                const RingOptions& options, LinksOf links_of) {
  TransferRun run{{}, {}, std::vector<RingStats>(static_cast<size_t>(n)),
          std::vector<absl::Duration>(static_cast<size_t>(n))};
  for (int r = 0; r < n; ++r) run.buffers.push_back(BufferOf(specs[r], n, r));
  run.statuses = SpawnRanks(n, [&](int r) {
    const SteadyStopwatch clock;
    absl::Status s = DirectTransfer(schedule, {r, n, 3}, links_of(r), specs[r],
                                    absl::MakeSpan(run.buffers[r]), options, &run.stats[r]);
    run.took[r] = clock.Elapsed();
    return s;
  });
  return run;
}

TransferRun RunTransfer(StrideSchedule schedule, int n, const std::vector<CollectiveSpec>& specs) {
  MemoryStrideMesh mesh(n);
  return RunTransfer(schedule, n, specs, testing::SmallSegments(),
                     [&](int r) -> StrideLinks& { return mesh.links(r); });
}

// Rank q's block for rank r in the uneven all-to-alls below: (7q + 11r + n) mod 24
// elements (40-byte segments: none, one, several with a short last one).
std::vector<std::vector<uint64_t>> UnevenSizes(int n) {
  std::vector<std::vector<uint64_t>> sizes(n, std::vector<uint64_t>(n));
  for (int q = 0; q < n; ++q) {
    for (int r = 0; r < n; ++r) sizes[q][r] = (q * 7 + r * 11 + n) % 24;
  }
  return sizes;
}

// Runs the uneven all-to-all of UnevenSizes(n) and expects every rank OK, its input kept
// and its result rank q's block for it as block q, in rank order.
TransferRun ExpectUnevenAllToAll(StrideSchedule schedule, int n) {
  const std::vector<std::vector<uint64_t>> sizes = UnevenSizes(n);
  std::vector<CollectiveSpec> specs;
  for (int r = 0; r < n; ++r) specs.push_back(UnevenSpec(sizes, r));
  TransferRun run = RunTransfer(schedule, n, specs);
  for (int r = 0; r < n; ++r) {
    EXPECT_TRUE(run.statuses[r].ok()) << "rank " << r << ": " << run.statuses[r];
    if (!run.statuses[r].ok()) continue;
    const size_t input_bytes = specs[r].count * sizeof(float);
    EXPECT_TRUE(Slice(run.buffers[r], 0, input_bytes) ==
                Slice(BufferOf(specs[r], n, r), 0, input_bytes))
        << "rank " << r << "'s input changed";
    uint64_t at = input_bytes;
    for (int q = 0; q < n; ++q) {
      const size_t bytes = sizes[q][r] * sizeof(float);
      EXPECT_TRUE(Slice(run.buffers[r], at, bytes) ==
                  Slice(BufferOf(specs[q], n, q), SendOffset(sizes, q, r) * sizeof(float), bytes))
          << "rank " << r << " block " << q;
      at += bytes;
    }
    EXPECT_EQ(at, run.buffers[r].size());
  }
  return run;
}

class DirectTransferTest : public ::testing::TestWithParam<StrideSchedule> {};

TEST_P(DirectTransferTest, EveryRankEndsWithTheChainsResultForEveryRingSizeRootAndSize) {
  for (int n = 3; n <= 6; ++n) {
    for (int root = 0; root < n; ++root) {
      for (CollectiveKind kind : {CollectiveKind::kScatter, CollectiveKind::kGather}) {
        // 40-byte segments: none, one, a part of one, several with a short last one.
        for (size_t block : {size_t{0}, size_t{1}, size_t{10}, size_t{23}}) {
          SCOPED_TRACE(absl::StrCat(CollectiveKindName(kind), " n ", n, " root ", root,
                                    " block ", block));
          const bool scatters = kind == CollectiveKind::kScatter;
          const CollectiveSpec spec =
              Spec(kind, DType::kFloat32, scatters ? block * n : block, root);
          const TransferRun run = RunTransfer(GetParam(), n, std::vector<CollectiveSpec>(n, spec));
          const size_t slot = block * sizeof(float);
          const Bytes roots = BufferOf(spec, n, root);
          for (int r = 0; r < n; ++r) {
            ASSERT_TRUE(run.statuses[r].ok()) << run.statuses[r];
            const Bytes& got = run.buffers[r];
            if (scatters) {
              // Block r is the root's block r; the rest stays as it was.
              Bytes want = BufferOf(spec, n, r);
              std::copy_n(roots.begin() + static_cast<ptrdiff_t>(r * slot), slot,
                          want.begin() + static_cast<ptrdiff_t>(r * slot));
              EXPECT_TRUE(got == want) << "rank " << r;
            } else if (r != root) {
              EXPECT_TRUE(got == BufferOf(spec, n, r)) << "rank " << r << " untouched";
            } else {
              for (int q = 0; q < n; ++q) {
                EXPECT_TRUE(Slice(got, q * slot, slot) == Slice(BufferOf(spec, n, q), 0, slot))
                    << "slot " << q;
              }
            }
          }
        }
      }
    }
  }
}

TEST_P(DirectTransferTest, AnAllToAllLeavesRankQsBlockRAsBlockQOfRankRForEveryRingSize) {
  for (int n = 1; n <= 6; ++n) {
    for (size_t block : {size_t{0}, size_t{1}, size_t{10}, size_t{23}}) {
      SCOPED_TRACE(absl::StrCat("n ", n, " block ", block));
      const CollectiveSpec spec = Spec(CollectiveKind::kAllToAll, DType::kFloat32, block * n);
      const TransferRun run = RunTransfer(GetParam(), n, std::vector<CollectiveSpec>(n, spec));
      const size_t slot = block * sizeof(float);
      for (int r = 0; r < n; ++r) {
        ASSERT_TRUE(run.statuses[r].ok()) << run.statuses[r];
        for (int q = 0; q < n; ++q) {
          EXPECT_TRUE(Slice(run.buffers[r], q * slot, slot) ==
                      Slice(BufferOf(spec, n, q), r * slot, slot))
              << "rank " << r << " block " << q;
        }
        // Every block but its own goes straight to its rank, and one comes from each.
        EXPECT_EQ(run.stats[r].bytes_sent, (n - 1) * slot) << "rank " << r;
        EXPECT_EQ(run.stats[r].bytes_received, (n - 1) * slot) << "rank " << r;
      }
    }
  }
}

// Beyond kDirectRanksLimit ranks the blocks hop the doubling's strides (Bruck's exchange,
// doubling_exchange.h): the same result, over links of strides 1, 2, 4, ... only.
TEST(DirectTransfer, AnAllToAllBeyondSixteenRanksHopsTheDoublingsLinksToTheSameResult) {
  for (int n : {kDirectRanksLimit + 1, 20, 24, 32}) {
    // 40-byte segments: none, one, several with a short last one.
    for (size_t block : {size_t{0}, size_t{1}, size_t{23}}) {
      SCOPED_TRACE(absl::StrCat("n ", n, " block ", block));
      const CollectiveSpec spec = Spec(CollectiveKind::kAllToAll, DType::kFloat32, block * n);
      const TransferRun run = RunTransfer(StrideSchedule::kDoubling, n,
                                          std::vector<CollectiveSpec>(n, spec));
      const size_t slot = block * sizeof(float);
      size_t hops = 0;  // blocks sent a rank: those whose distance has bit k set, per round
      for (int s = 1; s < n; s *= 2) {
        for (int i = 1; i < n; ++i) hops += (i & s) != 0;
      }
      for (int r = 0; r < n; ++r) {
        ASSERT_TRUE(run.statuses[r].ok()) << "rank " << r << ": " << run.statuses[r];
        for (int q = 0; q < n; ++q) {
          EXPECT_TRUE(Slice(run.buffers[r], q * slot, slot) ==
                      Slice(BufferOf(spec, n, q), r * slot, slot))
              << "rank " << r << " block " << q;
        }
        EXPECT_EQ(run.stats[r].bytes_sent, hops * slot) << "rank " << r;
      }
    }
  }
}

TEST(DirectTransfer, AnUnevenAllToAllBeyondSixteenRanksHopsTheDoublingsLinksToTheSameResult) {
  for (int n : {kDirectRanksLimit + 1, 19}) {
    SCOPED_TRACE(absl::StrCat("n ", n));
    ExpectUnevenAllToAll(StrideSchedule::kDoubling, n);
  }
}

TEST(DirectTransfer, AnAllToAllOverLinksThatQueueOneFrameNeverDeadlocks) {
  // Every rank sends and receives at once, ten segments to each rank, and a link holds one
  // unread frame (what a stride link promises for segments too large for its mailbox):
  // each rank's sends wait on receivers that are themselves sending. (The direct
  // schedule's passes: the doubling's gather pass needs the links' kStrideLinkQueuedFrames.)
  const int n = 5;
  MemoryStrideMesh mesh(n, /*capacity_frames=*/1);
  const CollectiveSpec spec = Spec(CollectiveKind::kAllToAll, DType::kFloat32, 100 * n);
  const TransferRun run =
      RunTransfer(StrideSchedule::kDirect, n, std::vector<CollectiveSpec>(n, spec),
                  testing::SmallSegments(),
                  [&](int r) -> StrideLinks& { return mesh.links(r); });
  for (int r = 0; r < n; ++r) {
    ASSERT_TRUE(run.statuses[r].ok()) << "rank " << r << ": " << run.statuses[r];
    EXPECT_TRUE(Slice(run.buffers[r], 0, 400) == Slice(BufferOf(spec, n, 0), r * 400, 400));
  }
}

TEST_P(DirectTransferTest, AnAllToAllWhoseRanksDisagreeFailsEveryRankWithItsBufferUntouched) {
  const int n = 4;
  std::vector<CollectiveSpec> specs;
  for (int r = 0; r < n; ++r) {
    specs.push_back(Spec(CollectiveKind::kAllToAll, DType::kFloat32, r == 3 ? 80 : 40));
  }
  const TransferRun run = RunTransfer(GetParam(), n, specs);
  for (int r = 0; r < n; ++r) {
    EXPECT_TRUE(absl::IsFailedPrecondition(run.statuses[r])) << "rank " << r << ": "
                                                             << run.statuses[r];
    EXPECT_TRUE(run.buffers[r] == BufferOf(specs[r], n, r)) << "rank " << r;
    EXPECT_TRUE(run.stats[r].buffer_untouched) << "rank " << r;
  }
  const TransferRun uneven = RunTransfer(
      GetParam(), 3, std::vector<CollectiveSpec>(3, Spec(CollectiveKind::kAllToAll,
                                                         DType::kFloat32, 10)));
  for (int r = 0; r < 3; ++r) {
    EXPECT_THAT(std::string(uneven.statuses[r].message()),
                HasSubstr("alltoall of 10 elements: not one block for each of 3 ranks"));
  }
}

TEST_P(DirectTransferTest, AnUnevenAllToAllLeavesRankQsBlockRAsBlockQOfRankRsResult) {
  for (int n = 1; n <= 6; ++n) {
    SCOPED_TRACE(absl::StrCat("n ", n));
    const TransferRun run = ExpectUnevenAllToAll(GetParam(), n);
    const std::vector<std::vector<uint64_t>> sizes = UnevenSizes(n);
    for (int r = 0; r < n; ++r) {
      uint64_t sent = 0;  // every block but its own, straight to its rank
      for (int q = 0; q < n; ++q) sent += q == r ? 0 : sizes[r][q] * sizeof(float);
      EXPECT_EQ(run.stats[r].bytes_sent, sent) << "rank " << r;
    }
  }
}

TEST_P(DirectTransferTest, AnUnevenAllToAllWhoseSplitsDoNotMatchFailsEveryRankAlikeUntouched) {
  const int n = 4;
  std::vector<std::vector<uint64_t>> sizes(n, std::vector<uint64_t>(n, 5));
  std::vector<CollectiveSpec> specs;
  for (int r = 0; r < n; ++r) specs.push_back(UnevenSpec(sizes, r));
  ++specs[2].receive_counts[1];  // rank 2 expects 6 elements from rank 1, which sends 5
  const TransferRun run = RunTransfer(GetParam(), n, specs);
  for (int r = 0; r < n; ++r) {
    EXPECT_TRUE(absl::IsFailedPrecondition(run.statuses[r])) << "rank " << r << ": "
                                                             << run.statuses[r];
    EXPECT_THAT(std::string(run.statuses[r].message()),
                HasSubstr("rank 1 sends 5 elements to rank 2, which expects 6 from it"))
        << "rank " << r;
    EXPECT_TRUE(run.buffers[r] == BufferOf(specs[r], n, r)) << "rank " << r;
    EXPECT_TRUE(run.stats[r].buffer_untouched) << "rank " << r;
  }
  // An even all-to-all on one rank and uneven ones on the others: a plain disagreement.
  std::vector<CollectiveSpec> mixed(specs.begin(), specs.begin() + 3);
  mixed[1] = Spec(CollectiveKind::kAllToAll, DType::kFloat32, 15);
  mixed[0] = UnevenSpec(std::vector<std::vector<uint64_t>>(3, std::vector<uint64_t>(3, 5)), 0);
  mixed[2] = UnevenSpec(std::vector<std::vector<uint64_t>>(3, std::vector<uint64_t>(3, 5)), 2);
  const TransferRun disagreeing = RunTransfer(GetParam(), 3, mixed);
  for (int r = 0; r < 3; ++r) {
    EXPECT_TRUE(IsAgreementMismatch(disagreeing.statuses[r])) << disagreeing.statuses[r];
    EXPECT_THAT(std::string(disagreeing.statuses[r].message()), HasSubstr("in uneven blocks"));
  }
}

TEST_P(DirectTransferTest, TheRootMovesWhatTheChainsRootDoesAndEveryOtherRankOneBlock) {
  const int n = 5;
  const int root = 3;
  const size_t block = 100;  // floats: 400 bytes, ten 40-byte segments
  for (CollectiveKind kind : {CollectiveKind::kScatter, CollectiveKind::kGather}) {
    SCOPED_TRACE(CollectiveKindName(kind));
    const bool scatters = kind == CollectiveKind::kScatter;
    const CollectiveSpec spec = Spec(kind, DType::kFloat32, scatters ? block * n : block, root);
    const TransferRun run = RunTransfer(GetParam(), n, std::vector<CollectiveSpec>(n, spec));
    const uint64_t bytes = block * sizeof(float);
    for (int r = 0; r < n; ++r) {
      ASSERT_TRUE(run.statuses[r].ok()) << run.statuses[r];
      const uint64_t moved = r == root ? (n - 1) * bytes : bytes;
      // The agreement and commit frames carry no payload.
      EXPECT_EQ(scatters == (r == root) ? run.stats[r].bytes_sent : run.stats[r].bytes_received,
                moved)
          << "rank " << r;
      EXPECT_EQ(scatters == (r == root) ? run.stats[r].bytes_received : run.stats[r].bytes_sent,
                0u)
          << "rank " << r;
    }
  }
}

TEST_P(DirectTransferTest, RanksDisagreeingOnTheRootAllFailWithTheirBuffersUntouched) {
  const int n = 4;
  for (CollectiveKind kind : {CollectiveKind::kScatter, CollectiveKind::kGather}) {
    SCOPED_TRACE(CollectiveKindName(kind));
    std::vector<CollectiveSpec> specs;
    for (int r = 0; r < n; ++r) specs.push_back(Spec(kind, DType::kFloat32, 40, r == 2 ? 1 : 0));
    const TransferRun run = RunTransfer(GetParam(), n, specs);
    for (int r = 0; r < n; ++r) {
      EXPECT_FALSE(run.statuses[r].ok()) << "rank " << r;
      EXPECT_THAT(std::string(run.statuses[r].message()), HasSubstr("root")) << run.statuses[r];
      EXPECT_TRUE(run.buffers[r] == BufferOf(specs[r], n, r)) << "rank " << r;
      EXPECT_TRUE(run.stats[r].buffer_untouched) << "rank " << r;
    }
  }
}

RingOptions ShortOptions() {
  RingOptions options = testing::SmallSegments();
  options.timeout = absl::Milliseconds(800);
  options.abort_notice_timeout = absl::Milliseconds(100);
  return options;
}

// A gather of 4 ranks to root 0, or an all-to-all, in which rank 1 sends on its link to
// rank 0 (stride 3) through a FaultyLink, with `fault` at send `cut` (none: counts its
// sends). Rank 1 sends 120 bytes to rank 0 either way, three 40-byte segments. (Or on
// `n` ranks, its link of `stride`, blocks of `block` elements.)
TransferRun RunWithFault(StrideSchedule schedule, CollectiveKind kind,
                         std::optional<uint64_t> cut, LinkFault fault, const RingOptions& options,
                         uint64_t* faulty_sends = nullptr, int n = 4, int stride = 3,
                         size_t block = 30) {
  MemoryStrideMesh mesh(n);
  FaultyLink faulty(mesh.ring(stride).link(1));
  if (cut.has_value()) faulty.Script(*cut, fault);
  LinksWithFault rank_1(mesh.links(1), mesh.ring(stride).link(1), faulty);
  const CollectiveSpec spec =
      Spec(kind, DType::kFloat32, kind == CollectiveKind::kGather ? block : block * n, 0);
  TransferRun run = RunTransfer(schedule, n, std::vector<CollectiveSpec>(n, spec), options,
                                [&](int r) -> StrideLinks& {
                                  return r == 1 ? rank_1 : mesh.links(r);
                                });
  if (faulty_sends != nullptr) *faulty_sends = faulty.sends();
  return run;
}

// No rank OK beside a rank that plainly failed; an OK rank's buffer as the clean run's;
// every rank done well before a 30 s deadline would have ended it.
void ExpectNoSplitOutcome(const TransferRun& run, const TransferRun& clean) {
  bool any_ok = false, any_plain = false;
  for (size_t r = 0; r < run.statuses.size(); ++r) {
    const absl::Status& s = run.statuses[r];
    any_ok = any_ok || s.ok();
    any_plain = any_plain || (!s.ok() && OutcomeMarkOf(s) != OutcomeMark::kInDoubt);
    if (s.ok()) {
      EXPECT_TRUE(run.buffers[r] == clean.buffers[r]) << "rank " << r << ": wrong result";
    }
    // Every wait has its deadline, and notices end the others' sooner.
    EXPECT_LT(run.took[r], absl::Seconds(5)) << "rank " << r;
  }
  EXPECT_FALSE(any_ok && any_plain) << "OK on one rank and a plain failure on another";
}

TEST_P(DirectTransferTest, AFaultAtAnyFrameNeverLeavesOneRankOkAndAnotherPlainlyFailed) {
  for (CollectiveKind kind : {CollectiveKind::kGather, CollectiveKind::kAllToAll}) {
    uint64_t sends = 0;
    const TransferRun clean =
        RunWithFault(GetParam(), kind, std::nullopt, LinkFault::Drop(), ShortOptions(), &sends);
    for (const absl::Status& s : clean.statuses) ASSERT_TRUE(s.ok()) << s;
    // Three segments, beside what the agreement and commit send there.
    ASSERT_GE(sends, 3u);
    for (uint64_t cut = 0; cut < sends; ++cut) {
      for (LinkFault fault : {LinkFault::Drop(), LinkFault::Close(), LinkFault::Stall()}) {
        SCOPED_TRACE(absl::StrCat(CollectiveKindName(kind), ": send ", cut,
                                  " of rank 1 to rank 0, fault ", static_cast<int>(fault.kind)));
        const TransferRun run = RunWithFault(GetParam(), kind, cut, fault, ShortOptions());
        ExpectNoSplitOutcome(run, clean);
      }
    }
  }
}

// Beyond sixteen ranks, a fault on rank 1's link of stride 1 (its round 0 of the
// doubling's exchange, beside the passes' frames): at any send, no split outcome.
TEST(DirectTransfer, AFaultAtAnyFrameOfAnAllToAllBeyondSixteenRanksNeverSplitsTheOutcome) {
  const int n = kDirectRanksLimit + 1;
  uint64_t sends = 0;
  const TransferRun clean = RunWithFault(StrideSchedule::kDoubling, CollectiveKind::kAllToAll,
                                         std::nullopt, LinkFault::Drop(), ShortOptions(), &sends,
                                         n, /*stride=*/1, /*block=*/3);
  for (const absl::Status& s : clean.statuses) ASSERT_TRUE(s.ok()) << s;
  ASSERT_GE(sends, 3u) << "the agreement's, round 0's segments and the commit's";
  for (uint64_t cut = 0; cut < sends; ++cut) {
    for (LinkFault fault : {LinkFault::Drop(), LinkFault::Close(), LinkFault::Stall()}) {
      SCOPED_TRACE(absl::StrCat("send ", cut, " of rank 1 to rank 2, fault ",
                                static_cast<int>(fault.kind)));
      const TransferRun run = RunWithFault(StrideSchedule::kDoubling, CollectiveKind::kAllToAll,
                                           cut, fault, ShortOptions(), nullptr, n, 1, 3);
      ExpectNoSplitOutcome(run, clean);
    }
  }
}

TEST_P(DirectTransferTest, ARankBlockedSendingIsFreedByTheNoticeOfARootThatGaveUp) {
  // A gather to root 0 in which rank 1's first segment to the root stalls in its send.
  // The root gives up at its 1 s deadline; rank 1, blocked in that send with 30 s left,
  // learns it from the root's notice.
  const int n = 4;
  const int stride = 3;  // from rank 1 to rank 0
  MemoryStrideMesh mesh(n);
  FaultyLink faulty(mesh.ring(stride).link(1));
  // The direct schedule's agreement sends rank 1's spec on that link first.
  faulty.Script(GetParam() == StrideSchedule::kDirect ? 1 : 0, LinkFault::Stall());
  LinksWithFault rank_1(mesh.links(1), mesh.ring(stride).link(1), faulty);
  const CollectiveSpec spec = Spec(CollectiveKind::kGather, DType::kFloat32, 30, 0);
  std::vector<Bytes> buffers;
  for (int r = 0; r < n; ++r) buffers.push_back(BufferOf(spec, n, r));
  std::vector<absl::Duration> took(n);
  const std::vector<absl::Status> statuses = SpawnRanks(n, [&](int r) {
    RingOptions options = testing::SmallSegments();
    options.timeout = r == 0 ? absl::Seconds(1) : absl::Seconds(30);
    const SteadyStopwatch clock;
    absl::Status s = DirectTransfer(GetParam(), {r, n, 3}, r == 1 ? rank_1 : mesh.links(r), spec,
                                    absl::MakeSpan(buffers[r]), options);
    took[r] = clock.Elapsed();
    return s;
  });
  EXPECT_FALSE(statuses[0].ok());
  for (int r = 1; r < n; ++r) {
    EXPECT_TRUE(absl::IsAborted(statuses[r])) << "rank " << r << ": " << statuses[r];
    EXPECT_THAT(std::string(statuses[r].message()), HasSubstr("rank 0 gave up"));
    EXPECT_LT(took[r], absl::Seconds(10)) << "rank " << r;
  }
}

INSTANTIATE_TEST_SUITE_P(EverySchedule, DirectTransferTest,
                         ::testing::Values(StrideSchedule::kDirect, StrideSchedule::kDoubling),
                         [](const auto& info) {
                           return std::string(StrideScheduleName(info.param));
                         });

TEST(DirectTransferSchedule, RunsLargeScattersAndGathersOnThreeToSixteenRanksInAutoAndDirect) {
  AlgorithmPolicy policy;
  policy.stride_links = true;
  const auto schedule = [&](CollectiveKind kind, size_t count, int n) {
    return DirectTransferSchedule(Spec(kind, DType::kFloat32, count), n, policy);
  };
  const size_t large = 1 << 20;  // 4 MiB
  EXPECT_EQ(schedule(CollectiveKind::kScatter, large, 4), StrideSchedule::kDirect);
  EXPECT_EQ(schedule(CollectiveKind::kGather, large, 8), StrideSchedule::kDoubling)
      << "the passes run as the smallest all-reduce does there";
  EXPECT_EQ(schedule(CollectiveKind::kGather, large, kDirectRanksLimit + 1), std::nullopt);
  EXPECT_EQ(schedule(CollectiveKind::kAllToAll, large, kDirectRanksLimit + 1),
            StrideSchedule::kDoubling)
      << "an all-to-all beyond: its passes and its data over the doubling's links";
  EXPECT_EQ(schedule(CollectiveKind::kGather, large, 2), std::nullopt) << "N=2: one hop anyway";
  EXPECT_EQ(schedule(CollectiveKind::kGather, 16, 4), std::nullopt)
      << "small: whole in the gather pass (StrideScheduleToCopy)";
  EXPECT_TRUE(StrideScheduleToCopy(Spec(CollectiveKind::kGather, DType::kFloat32, 16), 4, policy)
                  .has_value());
  EXPECT_EQ(schedule(CollectiveKind::kBroadcast, large, 4), std::nullopt)
      << "a broadcast's root would send N-1 times the buffer";
  EXPECT_EQ(schedule(CollectiveKind::kAllGather, large, 4), std::nullopt);
  policy.mode = AlgorithmPolicy::Mode::kDirect;
  EXPECT_EQ(schedule(CollectiveKind::kScatter, large, 4), StrideSchedule::kDirect);
  for (AlgorithmPolicy::Mode mode : {AlgorithmPolicy::Mode::kRing, AlgorithmPolicy::Mode::kRelay,
                                     AlgorithmPolicy::Mode::kDoubling}) {
    policy.mode = mode;
    EXPECT_EQ(schedule(CollectiveKind::kScatter, large, 4), std::nullopt)
        << "mode " << static_cast<int>(mode) << ": the chain";
  }
  policy.mode = AlgorithmPolicy::Mode::kAuto;
  policy.stride_links = false;
  EXPECT_EQ(schedule(CollectiveKind::kScatter, large, 4), std::nullopt) << "no stride links";
}

}  // namespace
}  // namespace ringsync
