// The collective's spec as every layer sees it: which specs are valid, what each kind
// takes and returns, and how two ranks' disagreement reads.
#include "core/collective.h"

#include <cmath>
#include <limits>
#include <string>

#include "core/utf8.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringsync {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

CollectiveSpec AllReduce() {
  CollectiveSpec spec;
  spec.kind = CollectiveKind::kAllReduce;
  spec.name = "grad/fc1";
  spec.dtype = DType::kFloat32;
  spec.count = 1024;
  spec.op = ReduceOp::kAvg;
  return spec;
}

void ExpectInvalid(const CollectiveSpec& spec, const std::string& starts_with) {
  const absl::Status status = ValidateSpec(spec);
  EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
  EXPECT_THAT(std::string(status.message()), StartsWith(starts_with)) << "name the field first";
}

TEST(ValidateSpec, AcceptsEveryKindWithItsOwnFields) {
  EXPECT_TRUE(ValidateSpec(AllReduce()).ok());
  CollectiveSpec spec = AllReduce();
  spec.kind = CollectiveKind::kBroadcast;
  spec.root = 3;
  EXPECT_TRUE(ValidateSpec(spec).ok());
  spec.kind = CollectiveKind::kAllGather;
  EXPECT_TRUE(ValidateSpec(spec).ok());
  spec.kind = CollectiveKind::kBarrier;
  spec.count = 0;
  EXPECT_TRUE(ValidateSpec(spec).ok());
  spec = AllReduce();
  spec.count = kMaxCollectiveElements;
  spec.name = std::string(kMaxCollectiveNameBytes, 'n');
  EXPECT_TRUE(ValidateSpec(spec).ok()) << "the bounds themselves are allowed";
}

TEST(ValidateSpec, RefusesWhatNoRankCouldRun) {
  CollectiveSpec spec = AllReduce();
  spec.kind = static_cast<CollectiveKind>(9);
  ExpectInvalid(spec, "kind 9 is unknown");
  spec = AllReduce();
  spec.name.clear();
  ExpectInvalid(spec, "name is empty");
  spec.name = std::string(kMaxCollectiveNameBytes + 1, 'n');
  ExpectInvalid(spec, "name is 1025 bytes long");
  spec.name = "gr\xFF" "ad";  // not UTF-8: a protobuf string field cannot carry it
  ExpectInvalid(spec, "name is not UTF-8 text");
  spec.name = "gr\xC3\xA4" "d/\xE6\xA8\xA9";  // UTF-8 beyond ASCII is a name like any
  EXPECT_TRUE(ValidateSpec(spec).ok());
  spec = AllReduce();
  spec.dtype = static_cast<DType>(42);
  ExpectInvalid(spec, "dtype 42 is unknown");
  spec = AllReduce();
  spec.count = kMaxCollectiveElements + 1;
  ExpectInvalid(spec, "count 1099511627777 is more than 2^40");
  spec = AllReduce();
  spec.kind = CollectiveKind::kBarrier;
  spec.count = 1;
  ExpectInvalid(spec, "count is 1; a barrier carries no data");
  spec = AllReduce();
  spec.kind = CollectiveKind::kBroadcast;
  spec.root = -1;
  ExpectInvalid(spec, "root -1 is negative");
}

TEST(ValidateSpec, AppliesTheReducersRulesToAllReduceOnly) {
  CollectiveSpec spec = AllReduce();
  spec.op = static_cast<ReduceOp>(9);
  EXPECT_THAT(std::string(ValidateSpec(spec).message()), HasSubstr("op has invalid value 9"));
  spec = AllReduce();
  spec.pre_scale = 0;
  ExpectInvalid(spec, "pre_scale is 0");
  spec = AllReduce();
  spec.post_scale = std::nan("");
  EXPECT_THAT(std::string(ValidateSpec(spec).message()), HasSubstr("post_scale is nan"));
  spec = AllReduce();
  spec.dtype = DType::kInt32;
  spec.pre_scale = 0.5;
  EXPECT_THAT(std::string(ValidateSpec(spec).message()),
              HasSubstr("scales apply to floating types only"));

  spec.kind = CollectiveKind::kBroadcast;
  spec.op = static_cast<ReduceOp>(9);
  EXPECT_TRUE(ValidateSpec(spec).ok()) << "a broadcast has no op or scales to check";
}

TEST(CollectiveKindTraits, SayWhatEachKindTakesAndReturns) {
  EXPECT_TRUE(TraitsOf(CollectiveKind::kAllReduce).reduces);
  EXPECT_TRUE(TraitsOf(CollectiveKind::kBroadcast).has_root);
  EXPECT_TRUE(TraitsOf(CollectiveKind::kAllGather).gathers);
  EXPECT_FALSE(TraitsOf(CollectiveKind::kBarrier).carries_data);
  EXPECT_FALSE(TraitsOf(CollectiveKind::kAllGather).reduces);
  EXPECT_TRUE(TraitsOf(CollectiveKind::kReduceScatter).reduces);
  EXPECT_TRUE(TraitsOf(CollectiveKind::kReduceScatter).scatters);
  EXPECT_EQ(CollectiveKindName(CollectiveKind::kReduceScatter), "reducescatter");
  EXPECT_TRUE(TraitsOf(CollectiveKind::kScatter).has_root);
  EXPECT_TRUE(TraitsOf(CollectiveKind::kScatter).scatters);
  EXPECT_FALSE(TraitsOf(CollectiveKind::kScatter).reduces);
  EXPECT_EQ(CollectiveKindName(CollectiveKind::kScatter), "scatter");
  EXPECT_TRUE(TraitsOf(CollectiveKind::kGather).has_root);
  EXPECT_TRUE(TraitsOf(CollectiveKind::kGather).gathers);
  EXPECT_FALSE(TraitsOf(CollectiveKind::kGather).scatters);
  EXPECT_EQ(CollectiveKindName(CollectiveKind::kGather), "gather");
  EXPECT_TRUE(TraitsOf(CollectiveKind::kAllToAll).exchanges);
  EXPECT_FALSE(TraitsOf(CollectiveKind::kAllToAll).has_root);
  EXPECT_FALSE(TraitsOf(CollectiveKind::kAllToAll).gathers);
  EXPECT_EQ(CollectiveKindName(CollectiveKind::kAllToAll), "alltoall");
  EXPECT_FALSE(IsValid(static_cast<CollectiveKind>(0)));
  EXPECT_FALSE(IsValid(static_cast<CollectiveKind>(9)));
}

TEST(ResultElements, IsWorldSizeTimesCountForAnAllGatherAndABlockForTheScatters) {
  CollectiveSpec spec = AllReduce();
  EXPECT_EQ(ResultElements(spec, 4), 1024u);
  spec.kind = CollectiveKind::kAllGather;
  EXPECT_EQ(ResultElements(spec, 4), 4096u);
  spec.count = std::numeric_limits<uint64_t>::max() / 2;
  EXPECT_EQ(ResultElements(spec, 4), std::nullopt) << "overflow";
  spec = AllReduce();
  spec.kind = CollectiveKind::kReduceScatter;
  EXPECT_EQ(ResultElements(spec, 4), 256u);
  EXPECT_EQ(ResultElements(spec, 3), std::nullopt) << "1024 is not 3 blocks";
  EXPECT_EQ(ResultElements(spec, 0), std::nullopt) << "no ring";
  spec.kind = CollectiveKind::kScatter;
  EXPECT_EQ(ResultElements(spec, 4), 256u) << "the rank's block of the root's buffer";
  EXPECT_EQ(ResultElements(spec, 3), std::nullopt);
  spec.kind = CollectiveKind::kGather;
  EXPECT_EQ(ResultElements(spec, 3), 3072u) << "the root's: every rank's input";
  spec.kind = CollectiveKind::kAllToAll;
  EXPECT_EQ(ResultElements(spec, 4), 1024u) << "a block from each rank, in place";
  EXPECT_EQ(ResultElements(spec, 3), std::nullopt) << "1024 is not 3 blocks";
}

TEST(DescribeShape, NamesWhatTwoRanksCompare) {
  CollectiveSpec spec = AllReduce();
  spec.pre_scale = 0.5;
  EXPECT_EQ(DescribeShape(spec), "allreduce 1024 x float32 avg pre_scale=0.5");
  spec.kind = CollectiveKind::kBroadcast;
  spec.root = 2;
  EXPECT_EQ(DescribeShape(spec), "broadcast 1024 x float32 from root 2");
  spec.kind = CollectiveKind::kBarrier;
  EXPECT_EQ(DescribeShape(spec), "barrier");
  spec = AllReduce();
  spec.kind = CollectiveKind::kReduceScatter;
  EXPECT_EQ(DescribeShape(spec), "reducescatter 1024 x float32 avg");
  spec.kind = CollectiveKind::kScatter;
  spec.root = 1;
  EXPECT_EQ(DescribeShape(spec), "scatter 1024 x float32 from root 1");
  spec.kind = CollectiveKind::kGather;
  EXPECT_EQ(DescribeShape(spec), "gather 1024 x float32 to root 1");
}

TEST(CheckAgreement, QuotesBothRanks) {
  CollectiveSpec mine = AllReduce();
  mine.sequence = 17;
  EXPECT_TRUE(CheckAgreement(mine, 2, mine, 1).ok());
  CollectiveSpec theirs = mine;
  theirs.count = 1000;
  EXPECT_EQ(CheckAgreement(mine, 2, theirs, 1).message(),
            "collective #17 'grad/fc1': rank 2 has allreduce 1024 x float32 avg, rank 1 has "
            "allreduce 1000 x float32 avg; every rank must pass the same count, dtype, op and root");
  theirs = mine;
  theirs.name = "grad/fc2";
  EXPECT_THAT(std::string(CheckAgreement(mine, 2, theirs, 1).message()),
              HasSubstr("ranks called different collectives"));
}

CollectiveSpec Fused(std::vector<FusedMember> members) {
  CollectiveSpec spec = AllReduce();
  spec.sequence = 17;
  spec.name = "fused";
  spec.count = 0;
  for (const FusedMember& m : members) spec.count += m.count;
  spec.members = std::move(members);
  return spec;
}

TEST(CheckAgreement, NamesTheFirstTensorThatDiffersInAFusedAllReduce) {
  const CollectiveSpec mine = Fused({{"fc1.weight", 100}, {"fc1.bias", 10}, {"fc2.bias", 10}});
  CollectiveSpec theirs = Fused({{"fc1.weight", 100}, {"fc1.bias", 10}, {"fc3.bias", 10}});
  const absl::Status s = CheckAgreement(mine, 2, theirs, 1);
  EXPECT_EQ(s.message(),
            "collective #17 'fused': tensor #2 differs: rank 2 has 'fc2.bias' (10 x float32), "
            "rank 1 has 'fc3.bias' (10 x float32); every rank must pass the same tensors, in "
            "the same order, to a fused all-reduce");
  EXPECT_TRUE(IsAgreementMismatch(s));
  theirs = Fused({{"fc1.weight", 100}, {"fc1.bias", 10}});
  EXPECT_THAT(std::string(CheckAgreement(mine, 2, theirs, 1).message()),
              HasSubstr("rank 1 has no tensor #2 (its fused all-reduce holds 2)"));
}

TEST(IsAgreementMismatch, IsTrueForEveryMessageOfCheckAgreementOnly) {
  CollectiveSpec mine = AllReduce();
  CollectiveSpec theirs = mine;
  theirs.count = 1;
  EXPECT_TRUE(IsAgreementMismatch(CheckAgreement(mine, 0, theirs, 1)));
  theirs = mine;
  theirs.name = "other";
  EXPECT_TRUE(IsAgreementMismatch(CheckAgreement(mine, 0, theirs, 1)));
  EXPECT_FALSE(IsAgreementMismatch(absl::FailedPreconditionError("the worker is shutting down")));
  EXPECT_FALSE(IsAgreementMismatch(absl::OkStatus()));
}

TEST(ValidateSpec, FusedMembersAddUpToTheCountAndAreNamed) {
  EXPECT_TRUE(ValidateSpec(Fused({{"a", 3}, {"b", 0}})).ok());
  CollectiveSpec spec = Fused({{"a", 3}, {"b", 4}});
  spec.count = 8;
  EXPECT_THAT(std::string(ValidateSpec(spec).message()),
              HasSubstr("members' counts add up to 7, not to count 8"));
  EXPECT_THAT(std::string(ValidateSpec(Fused({{"a", 3}, {"", 4}})).message()),
              HasSubstr("members[1].name is 0 bytes long"));
  EXPECT_THAT(std::string(ValidateSpec(Fused({{"a", 3}, {"b\x80", 4}})).message()),
              HasSubstr("members[1].name is not UTF-8 text"));
  spec = Fused({{"a", 3}});
  spec.kind = CollectiveKind::kBroadcast;
  EXPECT_THAT(std::string(ValidateSpec(spec).message()), HasSubstr("only an all-reduce"));
  spec = Fused({});
  spec.members.assign(kMaxFusedMembers + 1, FusedMember{"t", 0});
  EXPECT_THAT(std::string(ValidateSpec(spec).message()), HasSubstr("at most 16384"));
}

// Rank r's spec of an uneven all-to-all on three ranks in which rank q sends q + r + 1
// elements to rank r.
CollectiveSpec Uneven(int r) {
  CollectiveSpec spec;
  spec.kind = CollectiveKind::kAllToAll;
  spec.name = "tokens";
  spec.sequence = 9;
  spec.dtype = DType::kFloat32;
  for (int q = 0; q < 3; ++q) {
    spec.send_counts.push_back(static_cast<uint64_t>(r + q + 1));
    spec.receive_counts.push_back(static_cast<uint64_t>(q + r + 1));
    spec.count += static_cast<uint64_t>(r + q + 1);
  }
  return spec;
}

TEST(ValidateSpec, AnUnevenAllToAllsSplitsListEveryRankAndItsSendsAddUpToTheCount) {
  EXPECT_TRUE(ValidateSpec(Uneven(1)).ok());
  CollectiveSpec spec = Uneven(1);
  spec.count += 1;
  ExpectInvalid(spec, "send_counts add up to 9, not to count 10");
  spec = Uneven(1);
  spec.receive_counts.pop_back();
  ExpectInvalid(spec, "send_counts lists 3 ranks but receive_counts 2");
  spec = Uneven(1);
  spec.kind = CollectiveKind::kScatter;
  ExpectInvalid(spec, "split sizes are given for a scatter; only an all-to-all has them");
  spec = Uneven(1);
  spec.send_counts = {kMaxCollectiveElements, 1, 0};
  spec.count = kMaxCollectiveElements + 1;
  EXPECT_TRUE(absl::IsInvalidArgument(ValidateSpec(spec)));
  spec.send_counts.assign(kMaxAllToAllSplits + 1, 0);
  spec.receive_counts.assign(kMaxAllToAllSplits + 1, 0);
  spec.count = 0;
  EXPECT_THAT(std::string(ValidateSpec(spec).message()), HasSubstr("at most 4096"));
}

TEST(ResultElements, OfAnUnevenAllToAllIsWhatItReceivesBesideItsInput) {
  const CollectiveSpec spec = Uneven(2);  // sends 3 + 4 + 5, receives 3 + 4 + 5
  EXPECT_EQ(ResultElements(spec, 3), 12u);
  EXPECT_EQ(WorkingElements(spec, 3), 24u) << "the input, then the result";
  EXPECT_EQ(ResultElements(spec, 4), std::nullopt) << "splits for 3 ranks on a ring of 4";
  EXPECT_EQ(WorkingElements(AllReduce(), 4), 1024u);
  EXPECT_EQ(DescribeShape(spec), "alltoall 12 x float32 in uneven blocks");
}

TEST(CheckAgreement, LeavesAnUnevenAllToAllsCountsToCheckAllToAllCounts) {
  EXPECT_TRUE(CheckAgreement(Uneven(0), 0, Uneven(2), 2).ok());
  CollectiveSpec even = Uneven(2);
  even.send_counts.clear();
  even.receive_counts.clear();
  const absl::Status mixed = CheckAgreement(Uneven(0), 0, even, 2);
  EXPECT_TRUE(IsAgreementMismatch(mixed)) << mixed;
  EXPECT_THAT(std::string(mixed.message()),
              HasSubstr("rank 0 has alltoall 6 x float32 in uneven blocks, rank 2 has alltoall "
                        "12 x float32"));
  CollectiveSpec renamed = Uneven(2);
  renamed.name = "other";
  EXPECT_FALSE(CheckAgreement(Uneven(0), 0, renamed, 2).ok());

  std::vector<CollectiveSpec> specs = {Uneven(0), Uneven(1), Uneven(2)};
  EXPECT_TRUE(CheckAllToAllCounts(specs).ok());
  specs[2].receive_counts[1] = 7;  // rank 1 sends it 4
  const absl::Status s = CheckAllToAllCounts(specs);
  EXPECT_TRUE(IsAgreementMismatch(s)) << s;
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("collective #9 'tokens': rank 1 sends 4 elements to rank 2, which "
                        "expects 7 from it; every rank must pass the same size for each pair"));
  specs = {Uneven(0), Uneven(1)};
  EXPECT_THAT(std::string(CheckAllToAllCounts(specs).message()),
              HasSubstr("rank 0 gave 3 split sizes for a ring of 2 ranks"));
}

TEST(DescribeCollective, QuotesALongNameCut) {
  CollectiveSpec spec;
  spec.sequence = 3;
  spec.name = "grad/fc1";
  EXPECT_EQ(DescribeCollective(spec), "collective #3 'grad/fc1'");
  spec.name = std::string(1000, 'g');
  EXPECT_EQ(DescribeCollective(spec),
            absl::StrCat("collective #3 '", std::string(kQuotedNameBytes, 'g'), "...'"));
}

TEST(DescribeCollective, KeepsItsMessageTextWhateverTheName) {
  CollectiveSpec spec;
  spec.sequence = 4;
  // 43 three-byte characters: the 128-byte cut falls inside the 43rd.
  std::string cjk;
  for (int i = 0; i < 43; ++i) cjk += "\xE6\xA8\xA9";
  spec.name = cjk;
  EXPECT_EQ(QuotedName(spec), absl::StrCat("'", cjk.substr(0, 126), "...'"));
  spec.name = "gr\xFF" "ad";
  // Escaped, as it is not text (hex digits after an escape escaped too: unambiguous).
  EXPECT_EQ(QuotedName(spec), "'gr\\xff\\x61\\x64'");
  EXPECT_TRUE(IsValidUtf8(DescribeCollective(spec)));
}

}  // namespace
}  // namespace ringsync
