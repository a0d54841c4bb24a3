// Options: section.key on the command line and in INI files, command line first.
#include <gtest/gtest.h>

#include <boost/program_options.hpp>
#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>

#include "ppstage/config/device.h"
#include "ppstage/config/options.h"
#include "ppstage/core/error.h"

namespace ppstage {
namespace {

std::string writeIni(const std::string& text) {
  char path[] = "/tmp/ppstage_options_XXXXXX";
  const int fd = mkstemp(path);
  close(fd);
  std::ofstream(path) << text;
  return path;
}

bool parse(std::vector<const char*> argv, Config& config) {
  po::options_description options;
  addModelOptions(options, config.model);
  addStageCountOption(options, config.pipeline);
  addSplitOptions(options, config.pipeline);
  addTrainOptions(options, config.train);
  std::ostringstream help;
  argv.insert(argv.begin(), "test");
  return parseOptions(static_cast<int>(argv.size()), argv.data(), options, "usage", help);
}

TEST(Options, CommandLineOverridesConfigFile) {
  const std::string ini = writeIni(
      "[model]\nlayers = 6\nd_model = 48\n[pipeline]\nsplit_points = layers.2, layers.4\n"
      "[train]\nbatch_size = 2\n");
  Config config;
  ASSERT_TRUE(parse({"--config", ini.c_str(), "--model.layers", "8"}, config));
  EXPECT_EQ(config.model.layers, 8);
  EXPECT_EQ(config.model.d_model, 48);
  EXPECT_EQ(config.pipeline.split_points, (std::vector<std::string>{"layers.2", "layers.4"}));
  std::remove(ini.c_str());
}

TEST(Options, UnknownOptionInConfigFileIsAnError) {
  const std::string ini = writeIni("[model]\nlayres = 6\n");
  Config config;
  EXPECT_THROW(parse({"--config", ini.c_str()}, config), Error);
  try {
    parse({"--config", ini.c_str()}, config);
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown option 'model.layres' in config file"),
              std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("; did you mean --model.layers?"), std::string::npos)
        << e.what();
  }
  std::remove(ini.c_str());
}

// A misspelt option names the nearest known one, of this command or another; a name far
// from every option names none.
TEST(Options, AnUnknownOptionNamesTheNearestKnownOne) {
  const auto error = [](std::vector<const char*> argv) {
    Config config;
    try {
      parse(std::move(argv), config);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_EQ(error({"--train.step", "3"}),
            "unrecognised option '--train.step'; did you mean --train.steps?");
  EXPECT_EQ(error({"--model.layres", "3"}),
            "unrecognised option '--model.layres'; did you mean --model.layers?");
  EXPECT_EQ(error({"--output.log_evry", "3"}),  // an option this command does not declare
            "unrecognised option '--output.log_evry'; did you mean --output.log_every?");
  EXPECT_EQ(error({"--no.such_option", "1"}), "unrecognised option '--no.such_option'");
}

// Every command takes every option of a training config on its command line, as in its
// config file, and leaves those it does not declare to the commands that do.
TEST(Options, OptionsOfOtherCommandsAreTakenAndLeftAlone) {
  Config config;
  po::options_description options;
  addModelOptions(options, config.model);
  std::set<std::string> given;
  std::ostringstream help;
  const std::vector<const char*> argv = {"test", "--output.log_every", "0",    "--model.layers",
                                         "6",    "--compile.mode",     "block"};
  ASSERT_TRUE(
      parseOptions(static_cast<int>(argv.size()), argv.data(), options, "usage", help, &given));
  EXPECT_EQ(config.model.layers, 6);
  EXPECT_EQ(config.output.log_every, Config().output.log_every);  // not this command's
  EXPECT_EQ(given, (std::set<std::string>{"model.layers"}));
  const std::vector<const char*> bad = {"test", "--compile.mode", "fastest"};
  EXPECT_THROW(parseOptions(static_cast<int>(bad.size()), bad.data(), options, "usage", help),
               Error);  // checked as the command that reads it would
}

// An option given twice takes its last value, as argparse does: a script appends an
// override to its line.
TEST(Options, AnOptionGivenTwiceTakesTheLastValue) {
  Config config;
  ASSERT_TRUE(
      parse({"--model.layers", "4", "--train.batch_size", "6", "--model.layers", "2"}, config));
  EXPECT_EQ(config.model.layers, 2);
  EXPECT_EQ(config.train.batch_size, 6);
  const std::string ini = writeIni("[model]\nlayers = 9\n");
  Config both;  // the command line, its last value, over the file
  ASSERT_TRUE(parse({"--config", ini.c_str(), "--model.layers", "4", "--model.layers", "3"}, both));
  EXPECT_EQ(both.model.layers, 3);
  std::remove(ini.c_str());
}

// --data.buckets: ascending, for the bucket policy only (SequenceBatches checks them
// against the data's sequence length).
TEST(Options, BucketsAreAscendingAndForTheBucketPolicy) {
  const auto data = [](std::vector<const char*> argv) {
    Config config;
    po::options_description options;
    addModelOptions(options, config.model);
    addDataOptions(options, config.data);
    std::ostringstream help;
    argv.insert(argv.begin(), "test");
    parseOptions(static_cast<int>(argv.size()), argv.data(), options, "usage", help);
    validate(config.data);
    return config.data;
  };
  const DataConfig ok =
      data({"--data.seq_len_policy", "bucket", "--data.buckets", "16,32", "--model.seq_len", "64"});
  EXPECT_EQ(ok.buckets, (std::vector<int64_t>{16, 32}));
  EXPECT_TRUE(ok.cutsDocuments());
  for (const std::vector<const char*>& bad :
       {std::vector<const char*>{"--data.seq_len_policy", "bucket", "--data.buckets", "32,16"},
        {"--data.seq_len_policy", "bucket", "--data.buckets", "0,16"},
        {"--data.seq_len_policy", "variable", "--data.buckets", "16"},
        {"--data.seq_len_policy", "padded"},
        {"--data.documents", "true", "--data.path", "synthetic"},
        {"--data.eot", "-2"}}) {
    EXPECT_THROW(data(bad), Error) << bad.at(0) << " " << bad.at(1);
  }
}

TEST(Options, HelpStopsAndPrintsEveryOption) {
  Config config;
  po::options_description options;
  addModelOptions(options, config.model);
  std::ostringstream help;
  const char* argv[] = {"test", "--help"};
  EXPECT_FALSE(parseOptions(2, argv, options, "usage line", help));
  EXPECT_NE(help.str().find("--model.tie_embeddings"), std::string::npos);
  EXPECT_NE(help.str().find("usage line"), std::string::npos);
}

}  // namespace
}  // namespace ppstage

namespace ppstage {
namespace {

// --train.device and --comm.backend on hosts of 0, 1 and 2 GPUs (config/device.h).
DeviceFacts hostOf(int gpus, int local_rank, int local_ranks, bool nccl = true) {
  DeviceFacts facts;
  facts.gpus = gpus;
  facts.no_gpu_reason = gpus == 0 ? "no CUDA driver" : "";
  facts.local_rank = local_rank;
  facts.local_ranks = local_ranks;
  facts.nccl = nccl;
  return facts;
}

std::string refusalOf(const std::string& device, CommBackend backend, const DeviceFacts& facts) {
  try {
    resolveDevice(device, backend, facts);
  } catch (const Error& e) {
    return e.what();
  }
  return "(accepted)";
}

TEST(Device, EachRankTakesTheGpuOfItsLocalRankAndAutoMeansNcclForCudaTensors) {
  const RankDevice cpu = resolveDevice("cpu", CommBackend::kAuto, hostOf(2, 1, 2));
  EXPECT_FALSE(cpu.cuda());
  EXPECT_EQ(cpu.backend, CommBackend::kMpi);
  const RankDevice second = resolveDevice("cuda", CommBackend::kAuto, hostOf(2, 1, 2));
  EXPECT_EQ(second.text(), "cuda:1");
  EXPECT_EQ(second.backend, CommBackend::kNccl);
  const RankDevice pinned = resolveDevice("cuda:1", CommBackend::kNccl, hostOf(2, 0, 1));
  EXPECT_EQ(pinned.text(), "cuda:1");
  // Host-staged MPI: two ranks share one GPU.
  for (int rank = 0; rank < 2; ++rank) {
    const RankDevice shared = resolveDevice("cuda", CommBackend::kMpi, hostOf(1, rank, 2));
    EXPECT_EQ(shared.text(), "cuda:0");
    EXPECT_EQ(shared.backend, CommBackend::kMpi);
  }
  EXPECT_EQ(resolveDevice("cuda:0", CommBackend::kMpi, hostOf(1, 1, 2)).text(), "cuda:0");
}

TEST(Device, WhatAHostCannotGiveIsOneLineThatSaysWhatToDo) {
  EXPECT_EQ(refusalOf("cuda", CommBackend::kAuto, hostOf(0, 0, 1)),
            "--train.device cuda: no CUDA device is visible (no CUDA driver); use "
            "--train.device cpu");
  EXPECT_EQ(refusalOf("cuda:2", CommBackend::kAuto, hostOf(2, 0, 1)),
            "--train.device cuda:2: this host shows 2 CUDA devices (cuda:0 to cuda:1)");
  EXPECT_EQ(refusalOf("cuda:1", CommBackend::kMpi, hostOf(1, 0, 1)),
            "--train.device cuda:1: this host shows 1 CUDA device (cuda:0)");
  EXPECT_EQ(refusalOf("cpu", CommBackend::kNccl, hostOf(1, 0, 1)),
            "--comm.backend nccl carries CUDA tensors; with --train.device cpu use "
            "--comm.backend mpi (or auto), or train on GPUs with --train.device cuda");
  EXPECT_EQ(refusalOf("cuda", CommBackend::kAuto, hostOf(1, 0, 2)),
            "--train.device cuda with NCCL (--comm.backend auto): 2 ranks on this host would "
            "share 1 CUDA device (cuda:0), and NCCL needs a GPU per rank; start at most 1 per "
            "host, or use --comm.backend mpi (slower: through host memory)");
  EXPECT_EQ(refusalOf("cuda:0", CommBackend::kNccl, hostOf(4, 0, 2)),
            "--train.device cuda:0 with NCCL: 2 ranks on this host would share cuda:0, and "
            "NCCL needs a GPU per rank; start at most 1 per host, or use --comm.backend mpi "
            "(slower: through host memory)");
  EXPECT_EQ(refusalOf("cuda", CommBackend::kNccl, hostOf(1, 0, 1, /*nccl=*/false)),
            "this ppstage was built without NCCL (see ppstage --version); use --comm.backend "
            "mpi, which stages CUDA tensors through host memory");
  for (const char* bad : {"gpu", "cuda:", "cuda:x", "cuda:-1", "CUDA", "cuda:99999"}) {
    EXPECT_EQ(refusalOf(bad, CommBackend::kAuto, hostOf(1, 0, 1)),
              std::string("--train.device must be cpu, cuda or cuda:N (N a GPU's index); got '") +
                  bad + "'")
        << bad;
  }
}

}  // namespace
}  // namespace ppstage
