// `ppstage train --output.trace`, `ppstage timeline` and `ppstage schedule --svg` as a user
// runs them: the trace of a 2-rank 1F1B run holds, per rank and step, exactly the compute
// actions of the schedule (`ppstage schedule --json`, the reference), in order, on one
// track per rank with increasing timestamps; both pictures are XML that rsvg-convert
// renders to PNG.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "support/cli_runner.h"

namespace ppstage {
namespace {

constexpr int kSteps = 6;
const std::string kSchedule =
    " --pipeline.schedule 1f1b --pipeline.stages 2 --pipeline.microbatches 4";

// One per test process: CTest runs the tests of this suite side by side.
std::string tracePath() {
  return testing::TempDir() + "ppstage_trace_test_" + std::to_string(getpid()) + ".json";
}

nlohmann::json readJson(const std::string& path) {
  std::ifstream file(path);
  return nlohmann::json::parse(file);
}

bool isCompute(const std::string& action) { return action.find('_') == std::string::npos; }

// The schedule's compute actions of every rank, in order ("0F0", "0F1", "0B0", ...).
std::vector<std::vector<std::string>> plannedComputeActions() {
  const Result r = runPpstage("schedule" + kSchedule + " --json");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  std::vector<std::vector<std::string>> ranks;
  const nlohmann::json schedule = nlohmann::json::parse(r.out);
  for (const nlohmann::json& row : schedule.at("actions")) {
    std::vector<std::string> compute;
    for (const nlohmann::json& a : row) {
      if (isCompute(a.get<std::string>())) compute.push_back(a.get<std::string>());
    }
    ranks.push_back(compute);
  }
  return ranks;
}

class TraceCli : public testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::string launcher = std::string(PPSTAGE_MPIEXEC) + " -np 2";
    train_ =
        runPpstage(std::string("train --config ") + PPSTAGE_SOURCE_DIR + "/configs/gpt-tiny.ini" +
                       kSchedule + " --train.steps " + std::to_string(kSteps) +
                       " --train.threads 1 --output.log_every 0"
                       " --output.trace " +
                       tracePath(),
                   launcher);
  }
  static void TearDownTestSuite() { std::remove(tracePath().c_str()); }
  static Result train_;
};
Result TraceCli::train_;

TEST_F(TraceCli, OneTrackPerRankHoldsTheScheduleComputeActionsInOrder) {
  ASSERT_EQ(train_.exit_code, 0) << train_.err;
  EXPECT_NE(train_.out.find("trace: " + tracePath()), std::string::npos) << train_.out;
  const nlohmann::json trace = readJson(tracePath());
  EXPECT_EQ(trace.at("otherData").at("schedule"), "1f1b");

  std::map<int, std::string> track_names;
  std::map<int, std::vector<nlohmann::json>> tracks;  // pid -> complete events, file order
  for (const nlohmann::json& e : trace.at("traceEvents")) {
    if (e.at("ph") == "M" && e.at("name") == "process_name") {
      track_names[e.at("pid").get<int>()] = e.at("args").at("name").get<std::string>();
    }
    if (e.at("ph") == "X") tracks[e.at("pid").get<int>()].push_back(e);
  }
  ASSERT_EQ(tracks.size(), 2u);
  EXPECT_EQ(track_names[0], "rank 0 (stage 0)");
  EXPECT_EQ(track_names[1], "rank 1 (stage 1)");

  const auto planned = plannedComputeActions();
  ASSERT_EQ(planned.size(), 2u);
  for (const auto& [rank, events] : tracks) {
    std::map<int, std::vector<std::string>> computed;  // step -> compute actions in order
    std::map<int, std::multiset<std::string>> after_actions;
    double last_ts = -1, last_end = -1;
    for (const nlohmann::json& e : events) {
      const double ts = e.at("ts").get<double>(), dur = e.at("dur").get<double>();
      EXPECT_GT(ts, last_ts) << "rank " << rank << ": " << e.dump();
      EXPECT_GE(ts, last_end - 0.002) << "rank " << rank << " overlaps: " << e.dump();
      EXPECT_GE(dur, 0);
      last_ts = ts;
      last_end = ts + dur;
      const nlohmann::json& args = e.at("args");
      const int step = args.at("step").get<int>();
      const std::string cat = e.at("cat").get<std::string>();
      if (cat == "compute") {
        const std::string name = e.at("name").get<std::string>();
        EXPECT_EQ(name, std::to_string(args.at("stage").get<int>()) +
                            args.at("kind").get<std::string>() +
                            std::to_string(args.at("microbatch").get<int>()));
        computed[step].push_back(name);
      } else if (cat == "wait") {
        EXPECT_NEAR(args.at("wait_ms").get<double>(), dur / 1e3, 1e-3);
      } else if (cat != "post") {
        after_actions[step].insert(cat);
      }
    }
    ASSERT_EQ(computed.size(), static_cast<size_t>(kSteps)) << "rank " << rank;
    for (int step = 1; step <= kSteps; ++step) {
      EXPECT_EQ(computed[step], planned[static_cast<size_t>(rank)])
          << "rank " << rank << ", step " << step;
      EXPECT_EQ(after_actions[step],
                (std::multiset<std::string>{"gradient_sync", "all_reduce", "optimizer"}))
          << "rank " << rank << ", step " << step;
    }
  }
}

// One clock for both ranks: a stage computes on a micro-batch only after its neighbour
// posted the send carrying it (rank 1's 1Fm after rank 0's 0SEND_Fm, rank 0's 0Bm after
// rank 1's 1SEND_Bm), within the alignment's error (half a round trip, far below 0.1 ms).
TEST_F(TraceCli, RanksShareOneClock) {
  ASSERT_EQ(train_.exit_code, 0) << train_.err;
  std::map<std::pair<int, std::string>, double> start;  // (step, name) -> ts
  const nlohmann::json trace = readJson(tracePath());
  for (const nlohmann::json& e : trace.at("traceEvents")) {
    if (e.at("ph") == "X") {
      start[{e.at("args").at("step").get<int>(), e.at("name").get<std::string>()}] =
          e.at("ts").get<double>();
    }
  }
  constexpr double kToleranceUs = 100;
  for (int step = 1; step <= kSteps; ++step) {
    for (int m = 0; m < 4; ++m) {
      const std::string mb = std::to_string(m);
      EXPECT_GE(start.at({step, "1F" + mb}), start.at({step, "0SEND_F" + mb}) - kToleranceUs)
          << "step " << step << ", micro-batch " << m;
      EXPECT_GE(start.at({step, "0B" + mb}), start.at({step, "1SEND_B" + mb}) - kToleranceUs)
          << "step " << step << ", micro-batch " << m;
    }
  }
}

// `rsvg-convert in.svg -o out.png` and `xmllint --noout`: both succeed, the PNG is one.
void expectRendersToPng(const std::string& svg) {
  ASSERT_EQ(std::system(("xmllint --noout " + svg).c_str()), 0) << svg << " is not XML";
  const std::string png = svg + ".png";
  ASSERT_EQ(std::system(("rsvg-convert " + svg + " -o " + png).c_str()), 0)
      << "rsvg-convert (librsvg2-bin, scripts/install-deps.sh) cannot render " << svg;
  std::ifstream file(png, std::ios::binary);
  std::string magic(4, '\0');
  file.read(magic.data(), 4);
  EXPECT_EQ(magic, "\x89PNG");
  std::remove(png.c_str());
}

TEST_F(TraceCli, MeasuredAndPlannedTimelinesRenderToPng) {
  ASSERT_EQ(train_.exit_code, 0) << train_.err;
  const std::string dir = testing::TempDir();
  const Result measured =
      runPpstage("timeline --trace " + tracePath() + " --svg " + dir + "ppstage_measured.svg");
  ASSERT_EQ(measured.exit_code, 0) << measured.err;
  EXPECT_NE(measured.out.find("(the median one)"), std::string::npos) << measured.out;
  EXPECT_NE(measured.out.find("rank 1 (stage 1)"), std::string::npos) << measured.out;
  const Result all = runPpstage("timeline --step all --trace " + tracePath() + " --svg " + dir +
                                "ppstage_all_steps.svg");
  ASSERT_EQ(all.exit_code, 0) << all.err;
  const Result planned =
      runPpstage("schedule" + kSchedule + " --svg " + dir + "ppstage_planned.svg");
  ASSERT_EQ(planned.exit_code, 0) << planned.err;
  for (const char* name :
       {"ppstage_measured.svg", "ppstage_all_steps.svg", "ppstage_planned.svg"}) {
    std::ifstream file(dir + name);
    const std::string svg((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
    EXPECT_NE(svg.find("rank 0 (stage 0)"), std::string::npos) << name;
    EXPECT_NE(svg.find("F forward"), std::string::npos) << name;  // the legend
    expectRendersToPng(dir + name);
  }
}

TEST_F(TraceCli, AStepTheTraceDoesNotHoldIsOneClearError) {
  ASSERT_EQ(train_.exit_code, 0) << train_.err;
  const Result r = runPpstage("timeline --step 7 --trace " + tracePath());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "ppstage: error: --step 7: the trace holds steps 1 to 6\n");
  const Result junk =
      runPpstage("timeline --trace " + std::string(PPSTAGE_SOURCE_DIR) + "/configs/gpt-tiny.ini");
  EXPECT_EQ(junk.exit_code, 2);
  EXPECT_NE(junk.err.find("is not a ppstage trace"), std::string::npos) << junk.err;
}

}  // namespace
}  // namespace ppstage
