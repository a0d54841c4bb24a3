// See include/ppstage/observe/tensorboard_events.h. Built only with protobuf
// (PPSTAGE_WITH_TENSORBOARD); tensorboard_unavailable.cpp stands in without it.
#include "ppstage/observe/tensorboard_events.h"

#include <unistd.h>

#include <boost/crc.hpp>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "ppstage/core/error.h"
#include "ppstage/core/host_name.h"
#include "tensorboard_event.pb.h"

namespace ppstage {
namespace {

// TFRecord's checksum: CRC-32C (Castagnoli), rotated and offset ("masked") so that a CRC
// of bytes holding CRCs stays well distributed.
uint32_t maskedCrc(const char* data, size_t n) {
  boost::crc_optimal<32, 0x1EDC6F41, 0xFFFFFFFF, 0xFFFFFFFF, true, true> crc;
  crc.process_bytes(data, n);
  const uint32_t c = crc.checksum();
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

template <typename T>
std::string littleEndian(T value) {  // x86 and ARM Linux: the bytes as they lie
  std::string bytes(sizeof(T), '\0');
  std::memcpy(bytes.data(), &value, sizeof(T));
  return bytes;
}

double unixSeconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string eventFileName() {
  const auto seconds = static_cast<int64_t>(unixSeconds());
  return detail::concat("events.out.tfevents.", seconds, ".", thisHostName(), ".", ::getpid(),
                        ".ppstage");
}

}  // namespace

void requireTensorBoard() {}

TensorBoardWriter::TensorBoardWriter(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  PPSTAGE_CHECK(!ec, "cannot write --output.tensorboard '", dir, "': ", ec.message());
  path_ = (std::filesystem::path(dir) / eventFileName()).string();
  file_ = std::fopen(path_.c_str(), "wb");
  PPSTAGE_CHECK(file_ != nullptr, "cannot write --output.tensorboard '", dir,
                "': ", std::strerror(errno));
  tensorboard::Event first;
  first.set_wall_time(unixSeconds());
  first.set_file_version("brain.Event:2");
  writeRecord(first.SerializeAsString());
}

TensorBoardWriter::~TensorBoardWriter() {
  if (file_ != nullptr) std::fclose(file_);
}

void TensorBoardWriter::write(int64_t step,
                              const std::vector<std::pair<std::string, double>>& scalars) {
  tensorboard::Event event;
  event.set_wall_time(unixSeconds());
  event.set_step(step);
  tensorboard::Summary* summary = event.mutable_summary();
  for (const auto& [tag, value] : scalars) {
    tensorboard::SummaryValue* v = summary->add_value();
    v->set_tag(tag);
    v->set_simple_value(static_cast<float>(value));
  }
  writeRecord(event.SerializeAsString());
}

void TensorBoardWriter::writeRecord(const std::string& event) {
  const std::string length = littleEndian<uint64_t>(event.size());
  const std::string record = length + littleEndian(maskedCrc(length.data(), length.size())) +
                             event + littleEndian(maskedCrc(event.data(), event.size()));
  const bool written = std::fwrite(record.data(), 1, record.size(), file_) == record.size() &&
                       std::fflush(file_) == 0;
  PPSTAGE_CHECK(written, "cannot write --output.tensorboard file '", path_,
                "': ", std::strerror(errno));
}

std::vector<TensorBoardScalar> readTensorBoardScalars(const std::string& event_file) {
  std::ifstream in(event_file, std::ios::binary);
  PPSTAGE_CHECK(in.good(), "cannot read the event file '", event_file, "'");
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<TensorBoardScalar> scalars;
  size_t at = 0;
  for (int64_t record = 0; at < bytes.size(); ++record) {
    const auto bad = [&](const char* why) {
      return detail::concat("event file '", event_file, "': record ", record, " (at byte ", at,
                            ") ", why);
    };
    PPSTAGE_CHECK(bytes.size() - at >= 12, bad("is cut short"));
    uint64_t length = 0;
    uint32_t crc = 0;
    std::memcpy(&length, bytes.data() + at, 8);
    std::memcpy(&crc, bytes.data() + at + 8, 4);
    PPSTAGE_CHECK(crc == maskedCrc(bytes.data() + at, 8), bad("has a wrong length CRC"));
    PPSTAGE_CHECK(bytes.size() - at - 12 >= length + 4, bad("is cut short"));
    const char* data = bytes.data() + at + 12;
    std::memcpy(&crc, data + length, 4);
    PPSTAGE_CHECK(crc == maskedCrc(data, length), bad("has a wrong data CRC"));
    tensorboard::Event event;
    PPSTAGE_CHECK(event.ParseFromArray(data, static_cast<int>(length)), bad("does not decode"));
    for (const tensorboard::SummaryValue& v : event.summary().value()) {
      scalars.push_back({event.step(), v.tag(), v.simple_value()});
    }
    at += 12 + length + 4;
  }
  return scalars;
}

}  // namespace ppstage
