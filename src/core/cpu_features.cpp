// See include/ppstage/core/cpu_features.h.
#include "ppstage/core/cpu_features.h"

#include <fstream>
#include <set>
#include <sstream>
#include <vector>

namespace ppstage {

std::string bf16InstructionsIn(const std::string& cpuinfo) {
  std::set<std::string> found;
  std::istringstream lines(cpuinfo);
  for (std::string line; std::getline(lines, line);) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    const std::string key = line.substr(0, line.find_first_of(" \t:"));
    if (key != "flags" && key != "Features") continue;  // x86, ARM
    std::istringstream words(line.substr(colon + 1));
    for (std::string word; words >> word;) {
      if (word == "avx512_bf16" || word == "amx_bf16" || word == "bf16") found.insert(word);
    }
  }
  std::string text;
  for (const std::string& name : found) text += (text.empty() ? "" : ",") + name;
  return text;
}

std::string thisCpusBf16Instructions() {
  std::ifstream file("/proc/cpuinfo");
  if (!file.good()) return "?";
  std::ostringstream text;
  text << file.rdbuf();
  return bf16InstructionsIn(text.str());
}

}  // namespace ppstage
