// See include/ppstage/comm/failure_channel.h and Note [Failure reports].
#include "ppstage/comm/failure_channel.h"

#include <mpi.h>

#include <chrono>
#include <thread>

#include "ppstage/core/error.h"

namespace ppstage {

struct FailureChannel::Handle {
  MPI_Comm comm = MPI_COMM_NULL;
};

namespace {

// The channel carries two kinds of message, on a communicator no other message uses:
// failure reports to rank 0, and stop notices (Note [Abandoning a step]) to every rank.
constexpr int kReportTag = 1;
constexpr int kStopTag = 2;
// A report's message is one line; cut to this, it leaves at once (MPI's eager size).
constexpr size_t kMaxMessageBytes = 1024;

// The open channel's communicator; MPI_COMM_NULL when none is open.
MPI_Comm open_channel = MPI_COMM_NULL;

}  // namespace

FailureChannel::FailureChannel() : handle_(std::make_unique<Handle>()) {
  PPSTAGE_INTERNAL_ASSERT(open_channel == MPI_COMM_NULL, "a second failure channel");
  MPI_Comm_dup(MPI_COMM_WORLD, &handle_->comm);
  MPI_Comm_set_errhandler(handle_->comm, MPI_ERRORS_RETURN);
  open_channel = handle_->comm;
}

FailureChannel::~FailureChannel() {
  open_channel = MPI_COMM_NULL;
  MPI_Comm_free(&handle_->comm);
}

void sendFailureReport(const FailureReport& report) {
  if (open_channel == MPI_COMM_NULL) return;
  FailureReport line = report;
  line.message = line.message.substr(0, std::min(line.message.find('\n'), kMaxMessageBytes));
  // Never freed: a send still in flight after the wait below reads from it.
  const auto* bytes = new std::string(encodeFailureReport(line));
  MPI_Request request = MPI_REQUEST_NULL;
  if (MPI_Isend(bytes->data(), static_cast<int>(bytes->size()), MPI_BYTE, 0, kReportTag,
                open_channel, &request) != MPI_SUCCESS) {
    return;
  }
  const auto deadline = std::chrono::steady_clock::now() + kReportGrace;
  int done = 0;
  while (!done && std::chrono::steady_clock::now() < deadline) {
    if (MPI_Test(&request, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) return;
    if (!done) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

bool failureReportWaiting() {
  if (open_channel == MPI_COMM_NULL) return false;
  int waiting = 0;
  MPI_Iprobe(MPI_ANY_SOURCE, kReportTag, open_channel, &waiting, MPI_STATUS_IGNORE);
  return waiting != 0;
}

std::vector<FailureReport> collectFailureReports(std::chrono::milliseconds grace) {
  std::vector<FailureReport> reports;
  if (open_channel == MPI_COMM_NULL) return reports;
  int size = 1;
  MPI_Comm_size(open_channel, &size);
  const auto deadline = std::chrono::steady_clock::now() + grace;
  while (static_cast<int>(reports.size()) < size - 1 &&
         std::chrono::steady_clock::now() < deadline) {
    int waiting = 0;
    MPI_Status status;
    MPI_Iprobe(MPI_ANY_SOURCE, kReportTag, open_channel, &waiting, &status);
    if (!waiting) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      continue;
    }
    int count = 0;
    MPI_Get_count(&status, MPI_BYTE, &count);
    std::string bytes(static_cast<size_t>(count), '\0');
    MPI_Recv(bytes.data(), count, MPI_BYTE, status.MPI_SOURCE, kReportTag, open_channel,
             MPI_STATUS_IGNORE);
    try {
      reports.push_back(decodeFailureReport(bytes));
    } catch (const Error& e) {  // dated on arrival: it cannot claim to be the first
      reports.push_back(failureReportNow(status.MPI_SOURCE, 1, e.what()));
    }
  }
  return reports;
}

void sendStopNotices() {
  if (open_channel == MPI_COMM_NULL) return;
  int rank = 0, size = 1;
  MPI_Comm_rank(open_channel, &rank);
  MPI_Comm_size(open_channel, &size);
  static const char kNotice = 1;  // one byte: leaves at once; never waited for
  for (int peer = 0; peer < size; ++peer) {
    if (peer == rank) continue;
    MPI_Request request = MPI_REQUEST_NULL;
    if (MPI_Isend(&kNotice, 1, MPI_BYTE, peer, kStopTag, open_channel, &request) == MPI_SUCCESS) {
      MPI_Request_free(&request);
    }
  }
}

bool stopNoticeWaiting() {
  if (open_channel == MPI_COMM_NULL) return false;
  int waiting = 0;
  MPI_Iprobe(MPI_ANY_SOURCE, kStopTag, open_channel, &waiting, MPI_STATUS_IGNORE);
  return waiting != 0;
}

}  // namespace ppstage
