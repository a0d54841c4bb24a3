// TensorBoardWriter where ppstage was built without protobuf (see
// include/ppstage/observe/tensorboard_events.h): --output.tensorboard is refused at
// start-up with what to install.
#include "ppstage/core/error.h"
#include "ppstage/observe/tensorboard_events.h"

namespace ppstage {
namespace {

[[noreturn]] void refuse() {
  throw Error(
      "--output.tensorboard: this ppstage was built without protobuf; install libprotobuf-dev "
      "and protobuf-compiler (scripts/install-deps.sh does) and build again");
}

}  // namespace

void requireTensorBoard() { refuse(); }

TensorBoardWriter::TensorBoardWriter(const std::string& dir) { refuse(); }

TensorBoardWriter::~TensorBoardWriter() = default;

void TensorBoardWriter::write(int64_t, const std::vector<std::pair<std::string, double>>&) {
  refuse();
}

void TensorBoardWriter::writeRecord(const std::string&) { refuse(); }

std::vector<TensorBoardScalar> readTensorBoardScalars(const std::string&) { refuse(); }

}  // namespace ppstage
