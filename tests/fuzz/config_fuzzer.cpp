// libFuzzer target: the options of `ppstage train` from any command line and config file
// are parsed and validated, or refused with a ppstage::Error; never a crash, a hang or
// another exception.
//
// An input is command-line arguments, one a line, then an empty line, then the text of a
// config file (INI: `[section]` then `key = value`) that --config names, when there is one.
// Inputs that name a config file of their own are skipped.
#include <boost/program_options.hpp>

#include <sstream>

#include "fuzz_input.h"
#include "ppstage/config/config.h"
#include "ppstage/config/options.h"
#include "ppstage/core/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text = ppstage::fuzz::textOf(data, size);
  const size_t blank = text.find("\n\n");
  std::vector<std::string> args = ppstage::fuzz::linesOf(text.substr(0, blank));
  for (const std::string& a : args) {
    // The config file is the input's own: another could be a device that never ends.
    if (a.rfind("--config", 0) == 0) return 0;
  }
  args.insert(args.begin(), "train");
  if (blank != std::string::npos) {
    args.push_back("--config");
    args.push_back(ppstage::fuzz::writeScratch("fuzz.ini", text.substr(blank + 2)));
  }
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  ppstage::Config config;
  boost::program_options::options_description options("options");
  ppstage::addAllOptions(options, config);
  std::ostringstream help;
  std::set<std::string> given;
  std::map<std::string, std::string> given_text;
  try {
    if (ppstage::parseOptions(static_cast<int>(argv.size()), argv.data(), options,
                              "usage: ppstage train [options]", help, &given, &given_text)) {
      ppstage::validate(config);
    }
  } catch (const ppstage::Error&) {
    // Refused with a message: what bad options must get.
  }
  return 0;
}
