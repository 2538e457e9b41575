// Log lines: the worker's context in text lines and the JSON line shape.
#include "daemon/logging/log_formatter.h"

#include <sstream>

#include "daemon/logging/log_context.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "spdlog/sinks/ostream_sink.h"
#include "spdlog/spdlog.h"

namespace ringsync {
namespace {

using ::testing::EndsWith;
using ::testing::HasSubstr;
using ::testing::MatchesRegex;

std::string LogOneLine(std::unique_ptr<spdlog::formatter> formatter, const std::string& message) {
  std::ostringstream out;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_st>(out);
  spdlog::logger logger("worker", sink);
  logger.set_formatter(std::move(formatter));
  logger.warn("{}", message);
  return out.str();
}

TEST(LogContextSuffix, NamesWorkerRankAndGenerationWhenKnown) {
  EXPECT_EQ(LogContextSuffix(LogContext{}), "");
  EXPECT_EQ(LogContextSuffix(LogContext{"w2", -1, 0}), " w2");
  EXPECT_EQ(LogContextSuffix(LogContext{"w2", -1, 4}), " w2 gen 4");
  EXPECT_EQ(LogContextSuffix(LogContext{"w2", 2, 3}), " w2 rank 2 gen 3");
}

TEST(LogFormatter, TextLinesCarryTheContextAfterTheRole) {
  SetLogWorkerId("w2");
  SetLogRing(2, 3);
  EXPECT_THAT(LogOneLine(MakeTextLogFormatter(), "ring formed"),
              EndsWith("warning [worker w2 rank 2 gen 3] ring formed\n"));
  SetLogRing(-1, 4);
  EXPECT_THAT(LogOneLine(MakeTextLogFormatter(), "dissolved"),
              EndsWith("[worker w2 gen 4] dissolved\n"));
  SetLogWorkerId("");
  SetLogRing(-1, 0);
}

TEST(LogFormatter, JsonLinesAreOneEscapedObject) {
  SetLogWorkerId("w\"1");
  SetLogRing(1, 7);
  const std::string line = LogOneLine(MakeJsonLogFormatter(), "a \"quoted\"\nline\t\x01");
  EXPECT_THAT(line, MatchesRegex("\\{\"time\":\"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]{8}\\.[0-9]{3}Z\","
                                 "\"level\":\"warning\",.*\n"));
  EXPECT_THAT(line, HasSubstr(",\"role\":\"worker\",\"worker_id\":\"w\\\"1\",\"rank\":1,"
                              "\"generation\":7,\"msg\":\"a \\\"quoted\\\"\\nline\\t\\u0001\"}\n"));
  SetLogWorkerId("");
  SetLogRing(-1, 0);
  EXPECT_THAT(LogOneLine(MakeJsonLogFormatter(), "x"),
              HasSubstr(",\"role\":\"worker\",\"msg\":\"x\"}\n"));
}

}  // namespace
}  // namespace ringsync
