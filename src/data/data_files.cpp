// See include/ppstage/data/data_files.h.
#include "ppstage/data/data_files.h"

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "named_arrays.h"
#include "ppstage/core/error.h"
#include "ppstage/core/file.h"
#include "ppstage/core/text.h"
#include "token_file.h"

namespace ppstage {
namespace {

namespace fs = std::filesystem;

bool endsWith(const std::string& text, const std::string& tail) {
  return text.size() >= tail.size() &&
         text.compare(text.size() - tail.size(), tail.size(), tail) == 0;
}

// The first bytes of `path` (fewer when it is shorter).
std::string head(const std::string& path, size_t bytes) {
  checkReadableFile(path, "the data file --data.path");
  std::ifstream file(path, std::ios::binary);
  PPSTAGE_CHECK(file.good(), "cannot read the data file --data.path '", path, "'");
  std::string out(bytes, '\0');
  file.read(out.data(), static_cast<std::streamsize>(bytes));
  out.resize(static_cast<size_t>(file.gcount()));
  return out;
}

DataFormat formatByMagic(const std::string& path, const std::string& start) {
  const auto byte = [&](size_t i) { return static_cast<uint8_t>(start[i]); };
  if (start.compare(0, 6, "\x93NUMPY") == 0) return DataFormat::kNpy;
  if (start.compare(0, 4, "PK\x03\x04") == 0) return DataFormat::kTensors;
  if (hasTokenHeader(reinterpret_cast<const uint8_t*>(start.data()), start.size())) {
    return DataFormat::kTokens;
  }
  const bool idx = start.size() >= 4 && byte(0) == 0 && byte(1) == 0 && byte(2) == 0x08 &&
                   byte(3) >= 1 && byte(3) <= 4;
  const bool gzip = start.size() >= 2 && byte(0) == 0x1f && byte(1) == 0x8b;
  if (idx || (gzip && path.find("-ubyte") != std::string::npos)) return DataFormat::kIdx;
  if (endsWith(path, ".bin") || endsWith(path, ".tokens")) return DataFormat::kTokens;
  if (endsWith(path, ".npy")) return DataFormat::kNpy;
  if (endsWith(path, ".pt") || endsWith(path, ".pth")) return DataFormat::kTensors;
  return DataFormat::kText;
}

// The labels file of an IDX images file: --data.targets, or MNIST's naming
// (train-images-idx3-ubyte[.gz] -> train-labels-idx1-ubyte[.gz]).
std::string idxLabelsPath(const DataConfig& config) {
  if (!config.targets.empty()) return config.targets;
  std::string labels = config.path;
  const size_t at = labels.rfind("images-idx3");
  PPSTAGE_CHECK(at != std::string::npos, "--data.path '", config.path, "' is an IDX file not ",
                "named like MNIST's (…images-idx3…): say where its labels are with --data.targets");
  return labels.replace(at, 11, "labels-idx1");
}

// The .npy files of a folder, sorted by name: one named tensor each.
std::vector<NamedArray> readNpyFolder(const std::string& dir) {
  std::vector<fs::path> files;
  std::error_code error;
  for (fs::directory_iterator it(dir, error), end; !error && it != end; it.increment(error)) {
    if (it->path().extension() == ".npy") files.push_back(it->path());
  }
  PPSTAGE_CHECK(!error, "cannot read the data folder --data.path '", dir, "': ", error.message());
  std::sort(files.begin(), files.end());
  PPSTAGE_CHECK(!files.empty(), "the data folder --data.path '", dir, "' holds no .npy files");
  std::vector<NamedArray> arrays;
  for (const fs::path& f : files) arrays.push_back(readNpy(f.string(), f.stem().string()));
  return arrays;
}

bool isDirectory(const std::string& path) {
  std::error_code error;  // unreadable: not a folder; reading it as a file says why
  return fs::is_directory(path, error);
}

std::unique_ptr<Dataset> openNpy(const DataConfig& config) {
  if (isDirectory(config.path)) {
    return arrayDataset(readNpyFolder(config.path), "the .npy folder '" + config.path + "'");
  }
  std::vector<NamedArray> arrays{readNpy(config.path, fs::path(config.path).stem().string())};
  if (!config.targets.empty()) {
    arrays.push_back(readNpy(config.targets, fs::path(config.targets).stem().string()));
  }
  return arrayDataset(std::move(arrays), "the .npy file '" + config.path + "'");
}

}  // namespace

DataFormat resolveDataFormat(const DataConfig& config) {
  if (config.path.empty() || config.path == "synthetic") return DataFormat::kText;
  if (config.format != DataFormat::kAuto) return config.format;
  if (isDirectory(config.path)) return DataFormat::kNpy;
  return formatByMagic(config.path, head(config.path, 8));
}

bool isModelShaped(const DataConfig& config) {
  return resolveDataFormat(config) == DataFormat::kText;
}

std::unique_ptr<Dataset> openDataFile(const DataConfig& config, int64_t seq_len) {
  switch (resolveDataFormat(config)) {
    case DataFormat::kTokens: return openTokenFile(config, seq_len);
    case DataFormat::kNpy: return openNpy(config);
    case DataFormat::kTensors:
      return arrayDataset(readTensorFile(config.path), "the tensors file '" + config.path + "'");
    case DataFormat::kIdx: {
      std::vector<NamedArray> arrays{readIdx(config.path, "images"),
                                     readIdx(idxLabelsPath(config), "labels")};
      return arrayDataset(std::move(arrays), "the IDX files '" + config.path + "'");
    }
    case DataFormat::kAuto:
    case DataFormat::kText: break;
  }
  PPSTAGE_INTERNAL_ASSERT(false, "openDataFile for model-shaped data '", config.path, "'");
  return nullptr;
}

}  // namespace ppstage
