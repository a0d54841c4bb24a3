// Options: section.key on the command line and in INI files, command line first.
#include <gtest/gtest.h>

#include <boost/program_options.hpp>
#include <cstdio>
#include <fstream>
#include <sstream>

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
  std::remove(ini.c_str());
}

TEST(Options, BadValuesAreErrors) {
  Config config;
  EXPECT_THROW(parse({"--model.input_shape", "8,x"}, config), Error);
  EXPECT_THROW(parse({"--model.layers", "many"}, config), Error);
  EXPECT_THROW(parse({"--no.such_option", "1"}, config), Error);
  Config balance;  // a named choice is checked as it is parsed
  EXPECT_THROW(parse({"--pipeline.balance", "seconds"}, balance), Error);
  Config stages;
  ASSERT_TRUE(parse({"--pipeline.stages", "3", "--pipeline.split_points", "a"}, stages));
  EXPECT_THROW(validate(stages.pipeline), Error);
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
