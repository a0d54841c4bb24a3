// What a failed rank reports, and the one line that sums up a job's failures
// (Note [Failure reports] in comm/failure_channel.h says how reports travel).
#pragma once

#include <string>
#include <vector>

namespace ppstage {

struct FailureReport {
  int rank = 0;  // in the communicator it failed on: MPI_COMM_WORLD for the channel's
  int exit_code = 1;
  double time_s = 0;  // when it failed: seconds since the epoch, the system clock
  std::string message;
};

// `rank`'s report of `message`, dated now.
FailureReport failureReportNow(int rank, int exit_code, std::string message);

// "[rank 3] <message>": how every error line and summary names a rank.
std::string rankPrefixed(int rank, const std::string& message);

// The earliest of `reports` (at least one) by time_s, the lower rank on a tie.
const FailureReport& firstFailure(const std::vector<FailureReport>& reports);

// "ranks 1 and 3 of 4 failed; the first: [rank 1] <message>" (firstFailure), or
// "rank 1 of 2 failed: [rank 1] <message>". `reports` in any order, at least one.
std::string failureSummary(const std::vector<FailureReport>& reports, int world_size);

// FailureReport as bytes on the wire, and back; throws ppstage::Error for bytes that are
// not a report.
std::string encodeFailureReport(const FailureReport& report);
FailureReport decodeFailureReport(const std::string& bytes);

}  // namespace ppstage
