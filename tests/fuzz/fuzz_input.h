// Helpers the libFuzzer targets share: an input as text, as lines, and written to a file
// that a reader opens by path. Each target defines LLVMFuzzerTestOneInput; replay_main.cpp
// runs the same function over a corpus for CTest.
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

namespace ppstage::fuzz {

inline std::string textOf(const uint8_t* data, size_t size) {
  return std::string(reinterpret_cast<const char*>(data), size);
}

// `text` split at '\n' (the last line may lack one).
inline std::vector<std::string> linesOf(const std::string& text) {
  std::vector<std::string> lines;
  size_t begin = 0;
  while (begin < text.size()) {
    size_t end = text.find('\n', begin);
    if (end == std::string::npos) end = text.size();
    lines.push_back(text.substr(begin, end - begin));
    begin = end + 1;
  }
  return lines;
}

// A folder of this process's own for the files an input becomes ($TMPDIR or /tmp), removed
// when the process exits normally.
inline const std::string& scratchDir() {
  // Never destroyed: the exit handler below runs after static destructors would have.
  static const std::string* dir = [] {
    const char* tmp = std::getenv("TMPDIR");
    auto* d = new std::string(std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") +
                              "/ppstage-fuzz-" + std::to_string(getpid()));
    std::filesystem::create_directories(*d);
    std::atexit([] {
      std::error_code ignored;
      std::filesystem::remove_all(scratchDir(), ignored);
    });
    return d;
  }();
  return *dir;
}

// Writes `bytes` to `name` in scratchDir() and returns its path.
inline std::string writeScratch(const std::string& name, const std::string& bytes) {
  const std::string path = scratchDir() + "/" + name;
  FILE* file = std::fopen(path.c_str(), "wb");
  if (file == nullptr) std::abort();
  if (!bytes.empty() && std::fwrite(bytes.data(), 1, bytes.size(), file) != bytes.size()) {
    std::abort();
  }
  std::fclose(file);
  return path;
}

// A property every accepted input must have; a failure is a finding (abort, so that
// libFuzzer saves the input).
inline void require(bool holds, const char* what) {
  if (!holds) {
    std::fprintf(stderr, "fuzz property violated: %s\n", what);
    std::abort();
  }
}

}  // namespace ppstage::fuzz
