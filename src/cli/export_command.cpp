// `ppstage export`: a checkpoint's trained tensors back in one TorchScript file of the
// original model (see include/ppstage/checkpoint/export_model.h).
#include "commands.h"

#include <boost/program_options.hpp>

#include <iostream>
#include <optional>

#include "ppstage/checkpoint/export_model.h"
#include "ppstage/config/config.h"
#include "ppstage/config/options.h"
#include "ppstage/core/error.h"
#include "ppstage/train/job_setup.h"

namespace ppstage::cli {

int exportMain(int argc, const char* const* argv) {
  Config config;
  std::string out = "model.pt";
  std::string example_out;
  po::options_description options;
  // Every option of `ppstage train`, so that the run's own command line or --config works;
  // export reads [model], train.batch_size and train.seed, and --checkpoint.dir.
  addAllOptions(options, config);
  po::options_description section("Export");
  section.add_options()("out", po::value(&out)->default_value(out),
                        "the TorchScript file to write")(
      "example_out", po::value(&example_out)->default_value(""),
      "also write {\"input\": x, \"output\": y} here (torch.load-able): the example input "
      "and the pipelined stages' output on it, to check the file from Python");
  options.add(section);
  const char* usage =
      "usage: ppstage export [--config FILE] [model options] --checkpoint.dir D [--out FILE]\n\n"
      "Puts the trained parameters and buffers of the newest complete checkpoint in D back\n"
      "into one TorchScript module of the original model (the built-in one, or the file\n"
      "--model.name names), by module path, and saves it: torch.jit.load reads it, with\n"
      "every tensor named as in the original. Then loads the file back and checks its\n"
      "tensors against the checkpoint and its forward against the checkpoint's stages\n"
      "chained (skipped for a model with random ops). The model options must be those of\n"
      "the run: every option of `ppstage train` is accepted, so the run's own options or\n"
      "--config work; the others are ignored.";
  if (!parseOptions(argc, argv, options, usage, std::cout)) return 0;
  validate(config);
  PPSTAGE_CHECK(!config.checkpoint.dir.empty(), "ppstage export needs --checkpoint.dir");

  const std::optional<DataFile> data = openDataFileOf(config);  // its samples shape the model
  const ExportResult r =
      exportModel(config, config.checkpoint.dir, out, example_out, data ? &data->input : nullptr);
  std::cout << "exported " << r.checkpoint << " (step " << r.step << ") to " << out << ": "
            << r.tensors << " parameters and buffers by module path\n";
  if (!r.untouched.empty()) {
    std::cout << "  kept as in the model (not in the checkpoint: unused by forward):";
    for (const std::string& name : r.untouched) std::cout << " " << name;
    std::cout << "\n";
  }
  if (r.forward_checked) {
    std::cout << "  forward check: the file against the "
              << "checkpoint's stages chained, on "
              << "the example input: max abs diff " << r.forward_max_abs_diff << "\n";
  } else {
    std::cout << "  forward check skipped: the model has random ops (no --example_out either)\n";
  }
  return 0;
}

}  // namespace ppstage::cli
