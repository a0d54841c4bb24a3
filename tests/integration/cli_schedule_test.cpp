// `ppstage schedule` as a user runs it.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "support/cli_runner.h"

namespace ppstage {
namespace {

const std::string kSource = PPSTAGE_SOURCE_DIR;

TEST(CliSchedule, PrintsATimelineAndTheFigures) {
  const Result r = runPpstage(
      "schedule --pipeline.schedule 1f1b --pipeline.stages 4 "
      "--pipeline.microbatches 8");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("rank 3 | .  .  .  F0 B0 B0 F1"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("bubble fraction 0.2727"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("in flight per stage: 4 3 2 1"), std::string::npos) << r.out;
}

TEST(CliSchedule, JsonHasTheDocumentedFields) {
  const std::string csv = testing::TempDir() + "zb_" + std::to_string(getpid()) + ".csv";
  const Result r = runPpstage(
      "schedule --pipeline.schedule zb-h1 --pipeline.stages 4 "
      "--pipeline.microbatches 8 --costs 1,2,1,1 --json --csv " +
      csv);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j.at("valid"), true);
  EXPECT_NEAR(j.at("bubble_fraction").get<double>(), 3.0 / 27, 1e-9);
  EXPECT_EQ(j.at("makespan").get<double>(), 27);
  EXPECT_EQ(j.at("peak_inflight").size(), 4u);
  ASSERT_EQ(j.at("actions").size(), 4u);
  EXPECT_EQ(j.at("actions")[0][0], "0F0");
  // The written table runs again as it is.
  const Result again = runPpstage("schedule --pipeline.schedule " + csv + " --json");
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(nlohmann::json::parse(again.out).at("actions"), j.at("actions"));
  std::remove(csv.c_str());
}

TEST(CliSchedule, DeadlockExitsNonZeroWithTheMarkedGrid) {
  const Result r =
      runPpstage("schedule --pipeline.schedule " + kSource + "/tests/fixtures/deadlock.csv");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.out.find("rank 0: 0F0 0SEND_F0 0RECV_B0 [0B0]"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("ppstage: error: deadlock"), std::string::npos) << r.err;
}

TEST(CliSchedule, PluginAddsSchedules) {
  const Result r =
      runPpstage(std::string("schedule --pipeline.schedule_plugin ") + PPSTAGE_EXAMPLE_PLUGIN +
                 " --pipeline.schedule reverse-gpipe "
                 "--pipeline.stages 2 --pipeline.microbatches 3 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out).at("valid"), true);
}

TEST(CliSchedule, BadInput) {
  expectBadInput("schedule --pipeline.schedule zero --pipeline.stages 4",
                 "known schedules: 1f1b, gpipe, interleaved-1f1b, zb-h1");
  expectBadInput(
      "schedule --pipeline.schedule zb-h1 --pipeline.stages 4 "
      "--pipeline.microbatches 2",
      "at least as many micro-batches as stages");
  expectBadInput(
      "schedule --pipeline.schedule interleaved-1f1b --pipeline.stages 6 "
      "--pipeline.stages_per_rank 4",
      "must divide --pipeline.stages");
  expectBadInput("schedule --pipeline.stages 4 --costs 1,2", "--costs takes four numbers");
  expectBadInput(std::string("schedule --pipeline.schedule_plugin ") + PPSTAGE_NO_SYMBOL_PLUGIN,
                 "does not export ppstage_register_schedules");
}

// zb-v's layout (two stages per rank, in a V) is its default, said once; what the user set
// stays, and is refused as before.
TEST(CliSchedule, ZbVDefaultsItsLayoutUnlessTheUserSetOne) {
  const Result r =
      runPpstage("schedule --pipeline.schedule zb-v --pipeline.stages 4 --pipeline.microbatches 4");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("zb-v runs two stages per rank placed in a V: --pipeline.stages_per_rank 2 "
                       "and --pipeline.placement v"),
            std::string::npos)
      << r.out;
  expectBadInput(
      "schedule --pipeline.schedule zb-v --pipeline.stages 4 --pipeline.microbatches 4 "
      "--pipeline.placement loop",
      "zb-v places stages in a V (--pipeline.placement v); got loop");
}

// bench-comm's option errors say the value seen (they are checked before MPI starts).
TEST(CliBenchComm, OptionErrorsSayTheValueSeen) {
  expectBadInput("bench-comm --bench.rounds 0", "--bench.rounds must be at least 1; got 0");
  expectBadInput("bench-comm --bench.min_bytes 0", "--bench.min_bytes must be at least 1; got 0");
  expectBadInput("bench-comm --bench.min_bytes 64 --bench.max_bytes 8",
                 "--bench.max_bytes must be at least --bench.min_bytes (64); got 8");
  expectBadInput("bench-comm --bench.seconds=-1", "--bench.seconds must be positive; got -1");
}

}  // namespace
}  // namespace ppstage
