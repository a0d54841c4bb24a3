// See include/ppstage/comm/failure_reports.h.
#include "ppstage/comm/failure_reports.h"

#include <algorithm>
#include <chrono>
#include <iterator>
#include <sstream>
#include <utility>

#include "ppstage/comm/mpi_session.h"
#include "ppstage/core/error.h"

namespace ppstage {

FailureReport failureReportNow(int rank, int exit_code, std::string message) {
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  return {rank, exit_code, std::chrono::duration<double>(now).count(), std::move(message)};
}

namespace {

constexpr const char* kMagic = "ppstage-failure-1";

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

std::string rankPrefixed(int rank, const std::string& message) {
  return detail::concat("[", mpiRankName(rank), "] ", message);
}

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
  const std::string cause = rankPrefixed(first.rank, first.message);
  if (ranks.size() == 1) {
    return detail::concat(mpiRankName(ranks[0]), " of ", world_size, " failed: ", cause);
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

}  // namespace ppstage
