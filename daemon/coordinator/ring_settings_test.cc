// Specification of the ring settings a worker states at Join: bounded like every string
// from the network, and compared flag by flag with a live worker's.
#include "daemon/coordinator/ring_settings.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringsync {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

const std::vector<RingSetting> kRing = {{"--segment_bytes", "1048576"}, {"--algorithm", "auto"}};

TEST(RingSettings, WorkersThatStateTheSameValuesAgree) {
  EXPECT_TRUE(CheckSameRingSettings("w1", kRing, "w0", kRing).ok());
  EXPECT_TRUE(CheckSameRingSettings("w1", {}, "w0", kRing).ok()) << "an older worker states none";
}

TEST(RingSettings, AFlagOnlyOneWorkerStatesIsNotCompared) {
  const std::vector<RingSetting> newer = {{"--segment_bytes", "1048576"},
                                          {"--future_flag", "7"}};
  EXPECT_TRUE(CheckSameRingSettings("w1", newer, "w0", kRing).ok());
}

TEST(RingSettings, ADifferentValueIsRefusedNamingTheFlagBothValuesAndBothWorkers) {
  const std::vector<RingSetting> other = {{"--algorithm", "auto"}, {"--segment_bytes", "2097152"}};
  const absl::Status s = CheckSameRingSettings("w3", other, "w0", kRing);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(),
              AllOf(HasSubstr("worker 'w3' runs with --segment_bytes=2097152 where 'w0' runs "
                              "with --segment_bytes=1048576"),
                    HasSubstr("must run with the same --segment_bytes"),
                    HasSubstr("restart 'w3' with the ring's values"),
                    Not(HasSubstr("--algorithm"))));
}

TEST(RingSettings, EveryDifferingFlagIsNamed) {
  const std::vector<RingSetting> other = {{"--segment_bytes", "65536"}, {"--algorithm", "ring"}};
  const absl::Status s = CheckSameRingSettings("w3", other, "w0", kRing);
  EXPECT_THAT(s.message(), AllOf(HasSubstr("--segment_bytes=65536 where"),
                                 HasSubstr("--algorithm=ring where 'w0' runs with --algorithm=auto"),
                                 HasSubstr("the same --segment_bytes, --algorithm")));
}

TEST(RingSettings, SettingsWithinTheirBoundsAreValid) {
  EXPECT_TRUE(ValidateRingSettings("w0", kRing).ok());
  EXPECT_TRUE(ValidateRingSettings("w0", {}).ok());
  const std::vector<RingSetting> widest = {
      {"--" + std::string(kMaxRingSettingFlagBytes - 2, 'a'),
       std::string(kMaxRingSettingValueBytes, '~')}};
  EXPECT_TRUE(ValidateRingSettings("w0", widest).ok());
}

TEST(RingSettings, SettingsOutsideTheirBoundsAreRefusedSayingWhatIsWrong) {
  struct Case {
    std::vector<RingSetting> settings;
    const char* said;
  };
  std::vector<RingSetting> too_many;
  for (size_t i = 0; i <= kMaxRingSettings; ++i) {
    too_many.push_back({"--flag_" + std::to_string(i), "1"});
  }
  const Case cases[] = {
      {too_many, "states 17 ring settings; at most 16"},
      {{{"segment_bytes", "1"}}, "a ring setting named 'segment_bytes'"},
      {{{"--", "1"}}, "a flag is '--' and then 1..62 of [a-z0-9_]"},
      {{{"--Segment", "1"}}, "named '--Segment'"},
      {{{"--" + std::string(kMaxRingSettingFlagBytes - 1, 'a'), "1"}}, "a ring setting named"},
      {{{"--a", "1"}, {"--a", "1"}}, "states --a twice"},
      {{{"--a", ""}}, "states --a='': a value is 1..64 printable ASCII characters"},
      {{{"--a", "x y"}}, "a value is 1..64 printable"},
      {{{"--a", std::string("x\n", 2)}}, "a value is 1..64 printable"},
      {{{"--a", std::string(kMaxRingSettingValueBytes + 1, 'x')}}, "a value is 1..64"},
  };
  for (const Case& c : cases) {
    const absl::Status s = ValidateRingSettings("w0", c.settings);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.said;
    EXPECT_THAT(s.message(), AllOf(HasSubstr("worker 'w0'"), HasSubstr(c.said)));
  }
}

}  // namespace
}  // namespace ringsync
