// See include/ppstage/core/mapped_file.h.
#include "ppstage/core/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "ppstage/core/error.h"

namespace ppstage {

MappedFile::MappedFile(const std::string& path, const std::string& what) : path_(path) {
  const auto fail = [&] {
    throw Error(detail::concat("cannot read ", what, " '", path, "': ", std::strerror(errno)));
  };
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail();
  struct stat st {};
  errno = 0;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    const int reason = S_ISDIR(st.st_mode) ? EISDIR : errno != 0 ? errno : ENODEV;
    ::close(fd);
    errno = reason;
    fail();
  }
  size_ = static_cast<size_t>(st.st_size);
  if (size_ > 0) {
    void* mapped = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (mapped == MAP_FAILED) {
      ::close(fd);
      fail();
    }
    data_ = static_cast<const uint8_t*>(mapped);
  }
  ::close(fd);  // the mapping stays valid without the descriptor
}

void MappedFile::adviseSequential(bool sequential) const {
  if (data_ == nullptr) return;
  // Advice only: a kernel that ignores it reads the same bytes.
  ::madvise(const_cast<uint8_t*>(data_), size_, sequential ? MADV_SEQUENTIAL : MADV_NORMAL);
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), size_);
}

}  // namespace ppstage
