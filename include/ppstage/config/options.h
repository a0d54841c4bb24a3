// Command-line and INI parsing of ppstage's options (Boost.Program_options).
//
// A subcommand builds one options_description from the sections it uses, then calls
// parseOptions(), which reads the command line, then the `--config` file for whatever the
// command line left unset. The command then calls validate() on each section it uses.
#pragma once

#include <iosfwd>
#include <map>
#include <set>
#include <string>

#include "ppstage/config/config.h"
#include "ppstage/core/text.h"

namespace boost::program_options {
class options_description;
}

namespace ppstage {

namespace po = boost::program_options;

void addModelOptions(po::options_description& desc, ModelConfig& model);
// [pipeline] in three groups, so each command shows only the keys it reads.
void addStageCountOption(po::options_description& desc, PipelineConfig& pipeline);
void addSplitOptions(po::options_description& desc, PipelineConfig& pipeline);
void addScheduleOptions(po::options_description& desc, PipelineConfig& pipeline);
// --pipeline.schedule_plugin alone (in addScheduleOptions too).
void addSchedulePluginOption(po::options_description& desc, PipelineConfig& pipeline);
// [train] batch_size and seed: what the splitter reads.
void addTrainOptions(po::options_description& desc, TrainConfig& train);
// [train] everything else: steps, optimizer, loss, dp, ...
void addTrainingLoopOptions(po::options_description& desc, TrainConfig& train);
void addCompileOptions(po::options_description& desc, CompileConfig& compile);
void addDataOptions(po::options_description& desc, DataConfig& data);
void addEvalOptions(po::options_description& desc, EvalConfig& eval);
void addOutputOptions(po::options_description& desc, OutputConfig& output);
void addCheckpointOptions(po::options_description& desc, CheckpointConfig& checkpoint);
void addCommOptions(po::options_description& desc, CommConfig& comm);
void addPlanOptions(po::options_description& desc, PlanConfig& plan);
// --pipeline.auto: what `train` adds to the [plan] options.
void addAutoPlanOption(po::options_description& desc, PipelineConfig& pipeline);
// Every section: what `ppstage train` reads, and what a config file may contain.
void addAllOptions(po::options_description& desc, Config& config);

// Parses argv (argv[0] is the subcommand's name) into the variables bound in `options`,
// which gets `--help` and `--config FILE` added. Returns false when --help was asked for:
// the usage line and every option were printed to `out`, nothing else was done.
// Throws ppstage::Error on an unknown option, a bad value or an unreadable config file.
// `given`, when not null, receives the names of the options the user set (on the command
// line or in the config file), so that a command can fill in what was left to it;
// `given_text`, when not null, each of those options' text as given (the command line's
// over the file's; "true" for a switch), so that a command can write a config file of them.
bool parseOptions(int argc, const char* const* argv, po::options_description& options,
                  const std::string& usage, std::ostream& out,
                  std::set<std::string>* given = nullptr,
                  std::map<std::string, std::string>* given_text = nullptr);

// Cross-field checks; each throws ppstage::Error naming the option and the value seen.
void validate(const ModelConfig& model);
void validate(const PipelineConfig& pipeline);
void validate(const TrainConfig& train);
void validate(const CommConfig& comm);
void validate(const CompileConfig& compile);
void validate(const OutputConfig& output);
void validate(const CheckpointConfig& checkpoint);
void validate(const DataConfig& data);
void validate(const PlanConfig& plan);
// Every section above.
void validate(const Config& config);

}  // namespace ppstage
