// Runs the ppstage executable as a user would, for the CLI tests.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <fstream>
#include <string>

namespace ppstage {

struct Result {
  int exit_code = -1;
  std::string out;
  std::string err;
};

// `launcher` goes in front of the binary ("mpirun ... -np 2"); empty: run it directly.
inline Result runPpstage(const std::string& args, const std::string& launcher = "") {
  // One file per call: CTest runs these tests in parallel processes.
  static int calls = 0;
  const std::string err_path = testing::TempDir() + "ppstage_cli_stderr_" +
                               std::to_string(getpid()) + "_" + std::to_string(calls++) + ".txt";
  const std::string command = (launcher.empty() ? "" : launcher + " ") +
                              std::string(PPSTAGE_BINARY) + " " + args + " 2>" + err_path;
  Result result;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return result;
  std::array<char, 4096> buffer;
  size_t n;
  while ((n = fread(buffer.data(), 1, buffer.size(), pipe)) > 0)
    result.out.append(buffer.data(), n);
  const int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream err(err_path);
  result.err.assign(std::istreambuf_iterator<char>(err), std::istreambuf_iterator<char>());
  std::remove(err_path.c_str());
  return result;
}

// Exit code 2 and exactly one line on stderr, starting "ppstage: error: ", containing `what`.
inline void expectBadInput(const std::string& args, const std::string& what) {
  const Result r = runPpstage(args);
  EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.err;
  EXPECT_EQ(r.err.rfind("ppstage: error: ", 0), 0u) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find(what), std::string::npos) << "expected '" << what << "' in: " << r.err;
}

}  // namespace ppstage
