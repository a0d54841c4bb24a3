// How a job whose ranks fail in several places ends with one line that says so.
//
// Note [Failure reports]
// ~~~~~~~~~~~~~~~~~~~~~~
// A rank whose command throws mid-run (not in an agreed setup step, comm/agreement.h) prints
// its own line once, "[rank r] ...", and sends a FailureReport to rank 0 over a communicator
// of their own (MPI_COMM_WORLD duplicated when MPI starts, so no message of the job can
// match it). It then gives rank 0 a moment (kReportGrace) to end the job, and ends it
// itself (MPI_Abort) if rank 0 does not.
// Rank 0 looks for reports while it waits for anything (every MpiCommunicator wait): one
// that arrives makes its wait throw PeerFailedError, as rank 0 did not fail itself. Rank 0
// then (or after a failure of its own) gathers the reports that arrive within kReportGrace
// and prints one summary line, failureSummary(): which ranks failed and the first cause by
// the time each failed (a rank timing out on a failed peer fails after it). Then it ends
// the job with that cause's exit code.
// A rank that is killed sends no report; mpirun names it.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "ppstage/comm/communicator.h"

namespace ppstage {

struct FailureReport {
  int rank = 0;  // in MPI_COMM_WORLD
  int exit_code = 1;
  double time_s = 0;  // when it failed: seconds since the epoch, the system clock
  std::string message;
};

// How long a failed rank waits for rank 0 to end the job, and rank 0 for more reports.
constexpr std::chrono::milliseconds kReportGrace{1500};

// The earliest of `reports` (at least one) by time_s, the lower rank on a tie.
const FailureReport& firstFailure(const std::vector<FailureReport>& reports);

// "ranks 1 and 3 of 4 failed; the first: [rank 1] <message>" (firstFailure), or
// "rank 1 of 2 failed: [rank 1] <message>". `reports` in any order, at least one.
std::string failureSummary(const std::vector<FailureReport>& reports, int world_size);

// FailureReport as bytes on the wire, and back; throws ppstage::Error for bytes that are
// not a report.
std::string encodeFailureReport(const FailureReport& report);
FailureReport decodeFailureReport(const std::string& bytes);

// Rank 0's wait ended because another rank reported a failure; not a failure of rank 0.
class PeerFailedError : public CommError {
 public:
  using CommError::CommError;
};

// The report channel's lifetime: MpiSession opens it after MPI_Init and closes it before
// MPI_Finalize (both collective).
void openFailureChannel();
void closeFailureChannel();

// On a rank other than 0: sends `report` to rank 0, waiting at most kReportGrace for the
// send to leave. Never throws.
void sendFailureReport(const FailureReport& report);

// On rank 0: whether a report is waiting to be read (cheap: one MPI_Iprobe). False where
// the channel is not open.
bool failureReportWaiting();

// On rank 0: every report that arrives within `grace` (and any already waiting).
std::vector<FailureReport> collectFailureReports(std::chrono::milliseconds grace);

}  // namespace ppstage
