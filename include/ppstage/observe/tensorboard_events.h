// TensorBoard event files: the scalars a run reports, written so that TensorBoard reads
// them while the run goes on. A file is TFRecord records (the length, its masked CRC-32C,
// one Event message, its masked CRC-32C); the Event and Summary messages are encoded by
// protobuf from src/observe/tensorboard_event.proto (the fields of TensorFlow's event.proto
// and summary.proto that scalars use). No LibTorch here: its headers carry another
// protobuf's.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

namespace ppstage {

// Throws ppstage::Error, saying what to install, where ppstage was built without protobuf
// (docs/build.md): no event files then. Does nothing where it was built with it.
void requireTensorBoard();

class TensorBoardWriter {
 public:
  // Creates `dir` (and its parents) and a new event file in it,
  // events.out.tfevents.<unix seconds>.<host>.<pid>.ppstage, whose first event names the
  // format. Throws ppstage::Error "cannot write --output.tensorboard '<dir>': <reason>".
  explicit TensorBoardWriter(const std::string& dir);
  ~TensorBoardWriter();
  TensorBoardWriter(const TensorBoardWriter&) = delete;
  TensorBoardWriter& operator=(const TensorBoardWriter&) = delete;

  // One event of `scalars` (tag, value) at `step`, flushed: a watching TensorBoard sees it.
  // Throws ppstage::Error when the file cannot be written.
  void write(int64_t step, const std::vector<std::pair<std::string, double>>& scalars);

  const std::string& path() const { return path_; }

 private:
  void writeRecord(const std::string& event);

  std::string path_;
  std::FILE* file_ = nullptr;
};

struct TensorBoardScalar {
  int64_t step = 0;
  std::string tag;
  float value = 0;
};

// Every scalar of `event_file`, in order, checking each record's CRCs. Throws
// ppstage::Error naming the record that is cut short, fails its CRC or does not decode.
std::vector<TensorBoardScalar> readTensorBoardScalars(const std::string& event_file);

}  // namespace ppstage
