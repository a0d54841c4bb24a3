// See include/ppstage/core/file.h.
#include "ppstage/core/file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "ppstage/core/error.h"
#include "ppstage/core/host_name.h"

namespace ppstage {
namespace {

std::string systemReason() { return std::strerror(errno); }

// write(2) until all of `bytes` is out; false (errno set) on failure.
bool writeAll(int fd, const std::string& bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

std::string parentOf(const std::string& path) {
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  return parent.empty() ? "." : parent.string();
}

}  // namespace

void checkReadableFile(const std::string& path, const std::string& what) {
  std::error_code error;
  const std::filesystem::file_status status = std::filesystem::status(path, error);
  PPSTAGE_CHECK(!error, "cannot read ", what, " '", path, "': ", error.message());
  PPSTAGE_CHECK(!std::filesystem::is_directory(status), "cannot read ", what, " '", path,
                "': it is a directory");
  const std::ifstream file(path, std::ios::binary);
  PPSTAGE_CHECK(file.good(), "cannot read ", what, " '", path, "': ", systemReason());
}

std::string readFile(const std::string& path, const std::string& what, uint64_t max_bytes) {
  checkReadableFile(path, what);
  std::ifstream file(path, std::ios::binary);
  PPSTAGE_CHECK(file.good(), "cannot read ", what, " '", path, "': ", systemReason());
  std::string bytes;
  if (max_bytes == 0) {
    std::ostringstream all;
    all << file.rdbuf();
    bytes = all.str();
  } else {  // at most one byte past the limit, whatever the file is (a pipe, /dev/zero)
    bytes.resize(max_bytes + 1);
    file.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    bytes.resize(static_cast<size_t>(file.gcount()));
    PPSTAGE_CHECK(bytes.size() <= max_bytes, what, " '", path, "' has more than ", max_bytes,
                  " bytes, the most a ", what, " may have");
  }
  PPSTAGE_CHECK(!file.bad(), "cannot read ", what, " '", path, "': ", systemReason());
  return bytes;
}

void writeFileAtomically(const std::string& path, const std::string& bytes) {
  const std::string temp = path + ".tmp-" + std::to_string(::getpid());
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  PPSTAGE_CHECK(fd >= 0, "cannot write '", temp, "': ", systemReason());
  const bool written = writeAll(fd, bytes) && ::fsync(fd) == 0;
  const std::string reason = written ? "" : systemReason();
  ::close(fd);
  if (!written) {
    ::unlink(temp.c_str());
    PPSTAGE_FAIL("cannot write '", temp, "': ", reason);
  }
  if (::rename(temp.c_str(), path.c_str()) != 0) {
    const std::string why = systemReason();
    ::unlink(temp.c_str());
    PPSTAGE_FAIL("cannot rename '", temp, "' to '", path, "': ", why);
  }
  syncDirectory(parentOf(path));
}

void syncDirectory(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  PPSTAGE_CHECK(fd >= 0, "cannot open directory '", dir, "': ", systemReason());
  const bool synced = ::fsync(fd) == 0;
  const std::string reason = synced ? "" : systemReason();
  ::close(fd);
  PPSTAGE_CHECK(synced, "cannot sync directory '", dir, "': ", reason);
}

void checkWritableDirectory(const std::string& dir, const std::string& option) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  PPSTAGE_CHECK(!ec, "cannot write --", option, " '", dir, "': ", ec.message());
  PPSTAGE_CHECK(std::filesystem::is_directory(dir, ec), "cannot write --", option, " '", dir,
                "': it is not a directory");
  // Ranks on several machines may share `dir`.
  const std::string probe =
      dir + "/.ppstage-probe-" + thisHostName() + "-" + std::to_string(::getpid());
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  PPSTAGE_CHECK(fd >= 0, "cannot write --", option, " '", dir, "': ", systemReason());
  const bool written = writeAll(fd, "probe\n");
  const std::string reason = written ? "" : systemReason();
  ::close(fd);
  ::unlink(probe.c_str());
  PPSTAGE_CHECK(written, "cannot write --", option, " '", dir, "': ", reason);
}

void checkWritableFile(const std::string& path, const std::string& option) {
  std::error_code ec;
  PPSTAGE_CHECK(!std::filesystem::is_directory(path, ec), "cannot write --", option, " '", path,
                "': it is a directory");
  const std::string dir = parentOf(path);
  PPSTAGE_CHECK(std::filesystem::is_directory(dir, ec), "cannot write --", option, " '", path,
                "': '", dir, "' ",
                std::filesystem::exists(dir, ec) ? "is not a directory" : "does not exist");
  checkWritableDirectory(dir, option);
}

}  // namespace ppstage
