// `ppstage plan` as a user runs it: measuring gpt-tiny, the plan's JSON, a cost file it
// plans from again without measuring, the config it writes trained under mpirun, and bad
// input ending with one clear line and exit 2.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "support/cli_runner.h"

namespace ppstage {
namespace {

std::string mpirun(int np) { return std::string(PPSTAGE_MPIEXEC) + " -np " + std::to_string(np); }

std::string tinyGpt() {
  return std::string(" --config ") + PPSTAGE_SOURCE_DIR + "/configs/gpt-tiny.ini --train.threads 1";
}

std::string readText(const std::string& path) {
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

// Measured under mpirun (the links too), saved, planned again from the saved costs (the
// same ranking, no model), and the chosen configuration trained from the written config.
TEST(PlanCli, PlansMeasuredCostsAndWritesAConfigTrainRuns) {
  const std::string costs = testing::TempDir() + "ppstage_plan_costs.json";
  const std::string ini = testing::TempDir() + "ppstage_plan.ini";
  const Result measured = runPpstage(
      "plan" + tinyGpt() + " --json --plan.save_costs " + costs + " --write-config " + ini,
      mpirun(2));
  ASSERT_EQ(measured.exit_code, 0) << measured.err;
  const nlohmann::json plan = nlohmann::json::parse(measured.out);
  EXPECT_EQ(plan.at("ranks").get<int>(), 2);
  EXPECT_EQ(plan.at("links").get<std::string>(), "measured over 2 ranks");
  ASSERT_FALSE(plan.at("best").empty());
  const nlohmann::json& chosen = plan.at("chosen");
  EXPECT_EQ(chosen, plan.at("best").at(0));
  EXPECT_EQ(chosen.at("dp").get<int>() * chosen.at("pp").get<int>(), 2);
  EXPECT_EQ(chosen.at("split_points").size() + 1, chosen.at("stages").get<size_t>());
  double previous = 0;
  for (const nlohmann::json& c : plan.at("best")) {
    EXPECT_GE(c.at("predicted_step_s").get<double>(), previous * 0.995);
    previous = c.at("predicted_step_s").get<double>();
    EXPECT_GT(c.at("peak_memory_mb").get<double>(), 0);
    EXPECT_GT(c.at("tokens_per_s").get<double>(), 0);
  }
  EXPECT_FALSE(plan.at("default").is_null());
  std::cout << "chosen " << chosen.dump() << "\n";

  // From the saved costs: nothing measured, the same choice.
  const Result again = runPpstage("plan --plan.ranks 2 --json --plan.costs " + costs);
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(nlohmann::json::parse(again.out).at("chosen"), chosen);

  // Every replicated candidate shards its optimizer: it steps 1/dp of the elements (Note
  // [Sharding in the plan]).
  for (const nlohmann::json& c : plan.at("best")) {
    EXPECT_EQ(c.at("shard_optimizer").get<bool>(), c.at("dp").get<int>() > 1) << c.dump();
  }

  const std::string text = readText(ini);
  EXPECT_NE(text.find("schedule = " + chosen.at("schedule").get<std::string>()), std::string::npos)
      << text;
  EXPECT_NE(text.find(std::string("shard_optimizer = ") +
                      (chosen.at("shard_optimizer").get<bool>() ? "true" : "false")),
            std::string::npos)
      << text;
  const Result trained = runPpstage("train --config " + ini + " --train.steps 2", mpirun(2));
  ASSERT_EQ(trained.exit_code, 0) << trained.err << text;
  EXPECT_NE(trained.out.find("  schedule  " + chosen.at("schedule").get<std::string>() + ","),
            std::string::npos)
      << trained.out;
}

// Under a budget below every configuration's peak without recomputation (gpt-tiny at 2
// ranks), the plan recomputes (Note [Recomputation in the plan]): the chosen label, JSON
// and reasons say what per stage, the written config carries it, and train runs it with
// those blocks recomputed and its measured peak under the budget.
TEST(PlanCli, RecomputesWhereOnlyRecomputationMeetsTheBudget) {
  const std::string costs = testing::TempDir() + "ppstage_plan_recompute_costs.json";
  const std::string ini = testing::TempDir() + "ppstage_plan_recompute.ini";
  const std::string metrics = testing::TempDir() + "ppstage_plan_recompute_metrics.json";
  const Result free = runPpstage(
      "plan" + tinyGpt() + " --json --plan.top 1000 --plan.save_costs " + costs, mpirun(2));
  ASSERT_EQ(free.exit_code, 0) << free.err;
  double smallest = 1e300;
  const nlohmann::json unbudgeted = nlohmann::json::parse(free.out);
  ASSERT_FALSE(unbudgeted.at("best").empty());
  for (const nlohmann::json& c : unbudgeted.at("best")) {
    EXPECT_EQ(c.at("recompute").at("policy"), "none");
    smallest = std::min(smallest, c.at("peak_memory_mb").get<double>());
  }
  const double budget = 0.95 * smallest;
  const Result planned =
      runPpstage("plan" + tinyGpt() + " --plan.ranks 2 --json --plan.costs " + costs +
                 " --plan.memory_mb " + std::to_string(budget) + " --write-config " + ini);
  ASSERT_EQ(planned.exit_code, 0) << planned.err;
  const nlohmann::json chosen = nlohmann::json::parse(planned.out).at("chosen");
  std::cout << "budget " << budget << " MB: chosen " << chosen.dump() << "\n";
  const nlohmann::json& recompute = chosen.at("recompute");
  ASSERT_NE(recompute.at("policy"), "none");
  ASSERT_EQ(recompute.at("blocks").size(), chosen.at("stages").get<size_t>());
  EXPECT_EQ(recompute.at("reasons").size(), chosen.at("stages").get<size_t>());
  EXPECT_LE(chosen.at("peak_memory_mb").get<double>(), budget);
  const std::string text = readText(ini);
  EXPECT_NE(text.find("recompute = " + recompute.at("policy").get<std::string>()),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("recompute_blocks = "), std::string::npos) << text;

  const Result trained = runPpstage(
      "train --config " + ini + " --train.steps 3 --output.metrics_json " + metrics, mpirun(2));
  ASSERT_EQ(trained.exit_code, 0) << trained.err << text;
  std::ifstream file(metrics);
  const nlohmann::json run = nlohmann::json::parse(file);
  for (const nlohmann::json& stage : run.at("recompute")) {
    const size_t s = stage.at("stage").get<size_t>();
    EXPECT_EQ(stage.at("blocks").size(), recompute.at("blocks").at(s).get<size_t>()) << stage;
    EXPECT_GT(stage.at("kept_mb_per_microbatch").get<double>(), 0) << stage;
  }
  for (const nlohmann::json& rank : run.at("ranks")) {
    EXPECT_LE(rank.at("peak_allocated_mb").get<double>(), budget) << rank.dump();
  }
}

// With --train.tp 2 in the user's options, 4 ranks are planned as 2 groups of 2 whose units
// are measured sharded, and the written config keeps tp: dp x pp x tp = 4, which train runs
// on 4 ranks. A checkpoint.dir holding another run's checkpoints is left out, with the
// reason in the file: train would refuse it. Costs measured at tp 2 are refused for tp 1,
// and a plan of one process cannot measure sharded units.
TEST(PlanCli, PlansWithinTheUsersTpAndWritesAConfigTrainRuns) {
  const std::string dir = testing::TempDir() + "ppstage_plan_tp";
  const std::string ini = dir + "/planned.ini", costs = dir + "/costs.json";
  ASSERT_EQ(std::system(("rm -rf " + dir + " && mkdir -p " + dir + "/ckpt/step-00000004").c_str()),
            0);
  const Result planned =
      runPpstage("plan" + tinyGpt() + " --train.tp 2 --json --checkpoint.dir " + dir +
                     "/ckpt --plan.save_costs " + costs + " --write-config " + ini,
                 mpirun(4));
  ASSERT_EQ(planned.exit_code, 0) << planned.err;
  const nlohmann::json plan = nlohmann::json::parse(planned.out);
  const nlohmann::json& chosen = plan.at("chosen");
  EXPECT_EQ(plan.at("tp").get<int>(), 2);
  // 4 ranks on fewer cores: said, with how the costs were measured.
  const std::string note = plan.at("shared_cores_note").get<std::string>();
  if (plan.at("cores").get<int>() < 4) {
    EXPECT_NE(note.find("ranks share this machine's"), std::string::npos) << note;
    EXPECT_NE(note.find("measured in turns"), std::string::npos) << note;
    // Each tensor-parallel pair measured on its own, a core a thread where there are two.
    std::ifstream saved(costs);
    const double share = nlohmann::json::parse(saved).at("core_share").get<double>();
    EXPECT_DOUBLE_EQ(share, std::min(1.0, plan.at("cores").get<int>() / 2.0));
  } else {
    EXPECT_EQ(note, "");
  }
  EXPECT_EQ(chosen.at("tp").get<int>(), 2);
  EXPECT_EQ(chosen.at("dp").get<int>() * chosen.at("pp").get<int>(), 2) << chosen.dump();
  std::cout << "chosen " << chosen.dump() << "\n";
  const std::string text = readText(ini);
  EXPECT_NE(text.find("tp = 2\n"), std::string::npos) << text;
  EXPECT_NE(text.find("# checkpoint.dir left out: --checkpoint.dir '" + dir +
                      "/ckpt' already "
                      "holds checkpoints"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("[checkpoint]"), std::string::npos) << text;
  const Result trained = runPpstage("train --config " + ini + " --train.steps 2", mpirun(4));
  ASSERT_EQ(trained.exit_code, 0) << trained.err << text;
  EXPECT_NE(trained.out.find("  schedule  " + chosen.at("schedule").get<std::string>() + ","),
            std::string::npos)
      << trained.out;

  EXPECT_EQ(nlohmann::json::parse(readText(costs)).at("tp").get<int>(), 2);
  // train --pipeline.auto keeps the job's tp too (it refused tp before).
  const Result automatic = runPpstage(
      "train" + tinyGpt() + " --train.tp 2 --pipeline.auto true --train.steps 1", mpirun(4));
  ASSERT_EQ(automatic.exit_code, 0) << automatic.err;
  EXPECT_NE(automatic.out.find(" tp2 M"), std::string::npos) << automatic.out;

  const Result other_tp = runPpstage("plan --plan.ranks 4 --plan.costs " + costs);
  EXPECT_EQ(other_tp.exit_code, 2);
  EXPECT_NE(other_tp.err.find("was measured with its units sharded over --train.tp 2; this plan "
                              "has --train.tp 1"),
            std::string::npos)
      << other_tp.err;
  const Result alone = runPpstage("plan" + tinyGpt() + " --train.tp 2 --plan.ranks 4");
  EXPECT_EQ(alone.exit_code, 2);
  EXPECT_NE(alone.err.find("--train.tp 2: a plan measures each unit sharded over its "
                           "tensor-parallel group"),
            std::string::npos)
      << alone.err;
}

// train --pipeline.auto: planned on the job's own ranks, then trained as chosen; the
// metrics say what ran.
TEST(PlanCli, TrainPlansItsOwnConfiguration) {
  const std::string metrics = testing::TempDir() + "ppstage_auto_metrics.json";
  const Result r = runPpstage("train" + tinyGpt() +
                                  " --pipeline.auto true --pipeline.schedule gpipe"
                                  " --train.steps 3 --output.metrics_json " +
                                  metrics,
                              mpirun(2));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const size_t at = r.out.find("pipeline.auto: ");
  ASSERT_NE(at, std::string::npos) << r.out;
  std::cout << r.out.substr(at, r.out.find('\n', at) - at) << "\n";
  EXPECT_NE(r.out.find("the fastest of"), std::string::npos) << r.out;
  std::ifstream file(metrics);
  const nlohmann::json json = nlohmann::json::parse(file);
  const std::string schedule = json.at("schedule").get<std::string>();
  // What it says it chose is what ran (the label starts with the schedule's name).
  EXPECT_NE(r.out.find("pipeline.auto: " + schedule + " "), std::string::npos) << r.out;
  EXPECT_EQ(json.at("losses").size(), 3u);

  // A budget nothing fits ends every rank with one line.
  const Result bad = runPpstage("train" + tinyGpt() +
                                    " --pipeline.auto true --plan.memory_mb "
                                    "0.001 --train.steps 1",
                                mpirun(2));
  EXPECT_EQ(bad.exit_code, 2) << bad.err;
  EXPECT_NE(bad.err.find("the smallest predicted peak per rank is"), std::string::npos) << bad.err;
  const Result ranks =
      runPpstage("train" + tinyGpt() + " --pipeline.auto true --plan.ranks 4", mpirun(2));
  EXPECT_EQ(ranks.exit_code, 2) << ranks.err;
  EXPECT_NE(ranks.err.find("--pipeline.auto plans for the job's 2 ranks; --plan.ranks is 4"),
            std::string::npos)
      << ranks.err;
}

TEST(PlanCli, HelpDocumentsEveryFlag) {
  const Result r = runPpstage("plan --help");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  for (const char* flag :
       {"--plan.ranks", "--plan.memory_mb", "--plan.costs", "--plan.save_costs", "--plan.schedules",
        "--plan.top", "--plan.link_latency_us", "--plan.link_gbps", "--plan.allreduce_gbps",
        "--json", "--write-config", "--config", "--model.name", "--compile.mode",
        "--train.batch_size", "--train.optimizer", "--pipeline.schedule_plugin"}) {
    EXPECT_NE(r.out.find(flag), std::string::npos) << flag;
  }
}

// Every option of a training config is taken on the command line, as in a config file:
// `--output.log_every` is train's, and plan leaves it alone.
TEST(PlanCli, TakesTrainingOptionsItDoesNotUse) {
  const Result r = runPpstage("plan --output.log_every 0 --eval.every 5 --help");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  const Result typo = runPpstage("plan --output.log_evry 0 --help");
  EXPECT_EQ(typo.exit_code, 2);
  EXPECT_NE(typo.err.find("did you mean --output.log_every?"), std::string::npos) << typo.err;
}

TEST(PlanCli, BadInputEndsWithOneLine) {
  struct Case {
    std::string args, launcher, message;
  };
  const std::string costs = testing::TempDir() + "ppstage_plan_bad_costs.json";
  {
    std::ofstream file(costs);
    file << "{\"not\": \"a profile\"}";
  }
  const Case cases[] = {
      {"plan" + tinyGpt(), "", "--plan.ranks must name the ranks to plan for"},
      {"plan" + tinyGpt() + " --plan.ranks 2 --plan.memory_mb 0.001", "",
       "fits --plan.memory_mb 0.001: the smallest predicted peak per rank is"},
      {"plan" + tinyGpt() + " --plan.ranks 2 --plan.schedules 1f1b,nope", "",
       "--plan.schedules names 'nope'"},
      {"plan --plan.ranks 2 --plan.costs " + costs, "", "not a ppstage cost profile"},
      {"plan --plan.ranks 2 --plan.costs /nonexistent.json", "", "cannot read cost profile"},
      {"plan" + tinyGpt() + " --train.batch_size 3 --plan.ranks 16 --model.layers 1", "",
       "--plan.ranks 16 cannot be laid out"},
      {"plan" + tinyGpt() + " --plan.ranks 2 --plan.memory_mb 0.001", mpirun(2),
       "the smallest predicted peak per rank is"},
  };
  for (const Case& c : cases) {
    const Result r = runPpstage(c.args, c.launcher);
    EXPECT_EQ(r.exit_code, 2) << c.args << "\n" << r.err;
    EXPECT_NE(r.err.find("ppstage: error: "), std::string::npos) << c.args << "\n" << r.err;
    EXPECT_NE(r.err.find(c.message), std::string::npos) << c.args << "\n" << r.err;
  }
}

}  // namespace
}  // namespace ppstage
