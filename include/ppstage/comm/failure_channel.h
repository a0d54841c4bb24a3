// How a job whose ranks fail in several places ends with one line that says so.
//
// Note [Failure reports]
// ~~~~~~~~~~~~~~~~~~~~~~
// A rank whose command throws mid-run (not in an agreed setup step, comm/agreement.h) prints
// its own line once, "[rank r] ...", and sends a FailureReport (comm/failure_reports.h) of
// that line to rank 0 over a communicator of their own, the FailureChannel (MPI_COMM_WORLD
// duplicated when MPI starts, so no message of the job can match it). It then leaves rank 0
// up to kFailedRankWait to end the job, and ends it itself (MPI_Abort) if rank 0 does not.
// Rank 0 looks for reports in every MpiCommunicator wait that lasts (after 100 ms, then
// every 20 ms; not in NCCL's): one that arrives makes its wait throw PeerFailedError, as
// rank 0 did not fail itself. Rank 0 then (or after a failure of its own) gathers the
// reports that arrive within kReportGrace and prints one summary line, failureSummary():
// which ranks failed and the first cause by the time each failed (a rank timing out on a
// failed peer fails after it). Then it ends the job with that cause's exit code.
// A rank that is killed sends no report; mpirun names it.
#pragma once

#include <chrono>
#include <memory>
#include <vector>

#include "ppstage/comm/communicator.h"
#include "ppstage/comm/failure_reports.h"

namespace ppstage {

// How long rank 0 gathers reports; how long a failed rank leaves rank 0 to end the job.
constexpr std::chrono::milliseconds kReportGrace{1500};
constexpr std::chrono::milliseconds kFailedRankWait{3000};

// Rank 0's wait ended because another rank reported a failure; not a failure of rank 0.
class PeerFailedError : public CommError {
 public:
  using CommError::CommError;
};

// The reports' communicator, owned by MpiSession: duplicated from MPI_COMM_WORLD on
// construction and freed on destruction (both collective). The functions below use the
// one that is open: rank 0's waits on any communicator look for reports.
class FailureChannel {
 public:
  FailureChannel();
  ~FailureChannel();
  FailureChannel(const FailureChannel&) = delete;
  FailureChannel& operator=(const FailureChannel&) = delete;

  struct Handle;

 private:
  std::unique_ptr<Handle> handle_;
};

// On a rank other than 0: sends the first line of `report`'s message (at most 1 KiB, so
// that MPI sends it at once) to rank 0, waiting at most kReportGrace for it to leave.
// Never throws; does nothing where no channel is open.
void sendFailureReport(const FailureReport& report);

// On rank 0: whether a report is waiting to be read (one MPI_Iprobe). False where no
// channel is open.
bool failureReportWaiting();

// Tells every other rank that this one abandoned its step (Note [Abandoning a step] in
// core/interrupt.h): one byte each, never waited for. Does nothing where no channel is open.
void sendStopNotices();

// Whether another rank's stop notice has arrived (one MPI_Iprobe; the notice stays, so
// the answer stays true). False where no channel is open.
bool stopNoticeWaiting();

// On rank 0: every report that arrives within `grace` (and any already waiting).
std::vector<FailureReport> collectFailureReports(std::chrono::milliseconds grace);

}  // namespace ppstage
