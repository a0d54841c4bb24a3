// A file mapped read-only into memory: a data file of any size opens in the time of one
// mmap(2), and only the pages a step reads are loaded.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace ppstage {

// Owner of a read-only mapping of a whole file; not copyable (share it by pointer).
class MappedFile {
 public:
  // Maps `path`. Throws ppstage::Error "cannot read <what> '<path>': <reason>" when it cannot
  // be opened or mapped. An empty file maps to size() 0.
  MappedFile(const std::string& path, const std::string& what);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }
  // Tells the kernel the mapping is read from start to end (read ahead, drop behind), or,
  // with false, in the pattern it guesses itself (the default).
  void adviseSequential(bool sequential) const;

 private:
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace ppstage
