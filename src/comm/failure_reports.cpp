// See include/ppstage/comm/failure_reports.h and Note [Failure reports].
#include "ppstage/comm/failure_reports.h"

#include <mpi.h>

#include <algorithm>
#include <iterator>
#include <sstream>
#include <thread>

#include "ppstage/core/error.h"

namespace ppstage {
namespace {

constexpr const char* kMagic = "ppstage-failure-1";
constexpr int kTag = 1;

MPI_Comm channel = MPI_COMM_NULL;

// "1", "1 and 3", "1, 2 and 3"
std::string rankList(const std::vector<int>& ranks) {
  std::string text;
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (i > 0) text += i + 1 == ranks.size() ? " and " : ", ";
    text += std::to_string(ranks[i]);
  }
  return text;
}

}  // namespace

const FailureReport& firstFailure(const std::vector<FailureReport>& reports) {
  PPSTAGE_INTERNAL_ASSERT(!reports.empty(), "the first of no failures");
  return *std::min_element(reports.begin(), reports.end(), [](const auto& a, const auto& b) {
    return a.time_s != b.time_s ? a.time_s < b.time_s : a.rank < b.rank;
  });
}

std::string failureSummary(const std::vector<FailureReport>& reports, int world_size) {
  const FailureReport& first = firstFailure(reports);
  std::vector<int> ranks;
  for (const FailureReport& r : reports) ranks.push_back(r.rank);
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  const std::string cause = detail::concat("[rank ", first.rank, "] ", first.message);
  if (ranks.size() == 1) {
    return detail::concat("rank ", ranks[0], " of ", world_size, " failed: ", cause);
  }
  return detail::concat("ranks ", rankList(ranks), " of ", world_size,
                        " failed; the first: ", cause);
}

std::string encodeFailureReport(const FailureReport& report) {
  std::ostringstream out;
  out.precision(17);
  out << kMagic << '\n'
      << report.rank << '\n'
      << report.exit_code << '\n'
      << report.time_s << '\n'
      << report.message;
  return out.str();
}

FailureReport decodeFailureReport(const std::string& bytes) {
  std::istringstream in(bytes);
  std::string magic;
  FailureReport report;
  std::getline(in, magic);
  in >> report.rank >> report.exit_code >> report.time_s;
  PPSTAGE_CHECK(magic == kMagic && in && in.get() == '\n', "not a failure report: '",
                bytes.substr(0, 40), "'");
  report.message.assign(std::istreambuf_iterator<char>(in), {});
  return report;
}

void openFailureChannel() {
  if (channel == MPI_COMM_NULL) MPI_Comm_dup(MPI_COMM_WORLD, &channel);
}

void closeFailureChannel() {
  if (channel != MPI_COMM_NULL) MPI_Comm_free(&channel);
}

void sendFailureReport(const FailureReport& report) {
  if (channel == MPI_COMM_NULL) return;
  const std::string bytes = encodeFailureReport(report);
  MPI_Request request;
  if (MPI_Isend(bytes.data(), static_cast<int>(bytes.size()), MPI_BYTE, 0, kTag, channel,
                &request) != MPI_SUCCESS) {
    return;
  }
  const auto deadline = std::chrono::steady_clock::now() + kReportGrace;
  int done = 0;
  while (!done && std::chrono::steady_clock::now() < deadline) {
    MPI_Test(&request, &done, MPI_STATUS_IGNORE);
    if (!done) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

bool failureReportWaiting() {
  if (channel == MPI_COMM_NULL) return false;
  int waiting = 0;
  MPI_Iprobe(MPI_ANY_SOURCE, kTag, channel, &waiting, MPI_STATUS_IGNORE);
  return waiting != 0;
}

std::vector<FailureReport> collectFailureReports(std::chrono::milliseconds grace) {
  std::vector<FailureReport> reports;
  if (channel == MPI_COMM_NULL) return reports;
  int size = 1;
  MPI_Comm_size(channel, &size);
  const auto deadline = std::chrono::steady_clock::now() + grace;
  while (static_cast<int>(reports.size()) < size - 1 &&
         std::chrono::steady_clock::now() < deadline) {
    int waiting = 0;
    MPI_Status status;
    MPI_Iprobe(MPI_ANY_SOURCE, kTag, channel, &waiting, &status);
    if (!waiting) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      continue;
    }
    int count = 0;
    MPI_Get_count(&status, MPI_BYTE, &count);
    std::string bytes(static_cast<size_t>(count), '\0');
    MPI_Recv(bytes.data(), count, MPI_BYTE, status.MPI_SOURCE, kTag, channel, MPI_STATUS_IGNORE);
    try {
      reports.push_back(decodeFailureReport(bytes));
    } catch (const Error& e) {
      reports.push_back({status.MPI_SOURCE, 1, 0, e.what()});
    }
  }
  return reports;
}

}  // namespace ppstage
