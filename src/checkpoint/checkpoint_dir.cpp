// See include/ppstage/checkpoint/checkpoint_dir.h.
#include "ppstage/checkpoint/checkpoint_dir.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "ppstage/checkpoint/sha256.h"
#include "ppstage/core/error.h"
#include "ppstage/core/file.h"

namespace fs = std::filesystem;

namespace ppstage {
namespace {

constexpr const char* kPrefix = "step-";
constexpr size_t kDigits = 8;

// The step of a directory named step-<8 digits>; -1 for any other name.
int64_t stepOf(const std::string& name) {
  if (name.size() != std::char_traits<char>::length(kPrefix) + kDigits ||
      name.rfind(kPrefix, 0) != 0) {
    return -1;
  }
  const std::string digits = name.substr(name.size() - kDigits);
  if (!std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return -1;
  }
  return std::stoll(digits);
}

// Every step directory of `dir`, newest first.
std::vector<std::pair<int64_t, std::string>> stepDirectories(const std::string& dir) {
  std::vector<std::pair<int64_t, std::string>> found;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const int64_t step = stepOf(it->path().filename().string());
    std::error_code type_ec;
    if (step >= 0 && it->is_directory(type_ec)) found.emplace_back(step, it->path().string());
  }
  std::sort(found.rbegin(), found.rend());
  return found;
}

bool readBytes(const std::string& path, std::string& bytes) {
  std::ifstream file(path, std::ios::binary);
  if (!file) return false;
  bytes.assign(std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>());
  return !file.bad();
}

}  // namespace

std::string checkpointName(int64_t step) {
  char name[32];
  std::snprintf(name, sizeof(name), "%s%08lld", kPrefix, static_cast<long long>(step));
  return name;
}

std::string whyIncomplete(const std::string& step_dir, Manifest* manifest, Verify verify) {
  std::string text;
  if (!readBytes(step_dir + "/manifest.json", text)) return "manifest.json is missing";
  Manifest m;
  try {
    m = manifestFromJson(text, step_dir + "/manifest.json");
  } catch (const Error& e) {
    return e.what();
  }
  for (const CheckpointFile& file : m.files) {
    if (verify == Verify::kSizes) {
      std::error_code ec;
      const auto size = fs::file_size(step_dir + "/" + file.name, ec);
      if (ec) return file.name + " is missing";
      if (static_cast<int64_t>(size) != file.bytes) {
        return detail::concat(file.name, " has ", size, " bytes, the manifest says ", file.bytes);
      }
      continue;
    }
    std::string bytes;
    if (!readBytes(step_dir + "/" + file.name, bytes)) return file.name + " is missing";
    if (static_cast<int64_t>(bytes.size()) != file.bytes) {
      return detail::concat(file.name, " has ", bytes.size(), " bytes, the manifest says ",
                            file.bytes);
    }
    if (sha256Hex(bytes) != file.sha256) return file.name + " does not match its checksum";
  }
  if (manifest != nullptr) *manifest = std::move(m);
  return "";
}

std::optional<FoundCheckpoint> findNewestCheckpoint(const std::string& dir,
                                                    std::vector<std::string>& warnings) {
  for (const auto& [step, path] : stepDirectories(dir)) {
    FoundCheckpoint found{path, {}};
    const std::string why = whyIncomplete(path, &found.manifest);
    if (why.empty()) return found;
    warnings.push_back("skipping incomplete checkpoint " + path + ": " + why);
  }
  return std::nullopt;
}

bool hasDamagedCheckpoint(const std::string& dir) {
  for (const auto& [step, path] : stepDirectories(dir)) {
    if (fs::exists(path + "/manifest.json") && !whyIncomplete(path, nullptr).empty()) return true;
  }
  return false;
}

std::string newestStepDirectory(const std::string& dir) {
  const auto found = stepDirectories(dir);
  return found.empty() ? std::string() : found.front().second;
}

void pruneCheckpoints(const std::string& dir, int64_t keep) {
  int64_t complete = 0;
  for (const auto& [step, path] : stepDirectories(dir)) {
    // Sizes, not checksums: hashing every kept checkpoint again at every save would cost
    // more than the save.
    const bool is_complete = whyIncomplete(path, nullptr, Verify::kSizes).empty();
    if (is_complete && complete++ < keep) continue;
    if (!is_complete && complete == 0) continue;  // newer than every complete one
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  syncDirectory(dir);
}

}  // namespace ppstage
