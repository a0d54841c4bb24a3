// MPI's lifetime in a ppstage process, and the few world-level calls the CLI needs. mpi.h
// stays out of public headers.
//
// Note [MPI thread level]
// ~~~~~~~~~~~~~~~~~~~~~~~
// ppstage asks for MPI_THREAD_SERIALIZED: a communicator may be used from more than one
// thread (the executor, a watchdog), so MPI must tolerate calls from different threads, but
// MpiCommunicator serializes its MPI calls with a mutex, so MPI never sees two at once and
// we avoid MPI_THREAD_MULTIPLE's per-call locking inside the library. Progress happens
// when a Work is tested or waited on; with Open MPI's shared-memory transport the receiver
// pulls large messages itself (single copy), so the sender need not be inside MPI.
#pragma once

#include <string>

namespace ppstage {

class MpiSession {
 public:
  // MPI_Init_thread(MPI_THREAD_SERIALIZED). Throws CommError when MPI is already active or
  // provides less than that level.
  MpiSession();
  ~MpiSession();  // MPI_Finalize
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;

  int worldRank() const { return rank_; }
  int worldSize() const { return size_; }

 private:
  int rank_ = 0;
  int size_ = 1;
};

// True between MPI_Init and MPI_Finalize.
bool mpiActive();
// This process's rank in MPI_COMM_WORLD; -1 when MPI is not active.
int mpiWorldRank();
// MPI_Abort(MPI_COMM_WORLD): ends every rank of the job.
[[noreturn]] void mpiAbortWorld(int exit_code);

// How a ppstage process ends on an error: one line `ppstage: error: <message>` on stderr
// (`ppstage: error: [rank r] <message>` under MPI), then exit with `exit_code`; under MPI
// every rank of the job ends (MPI_Abort), so none is left waiting.
[[noreturn]] void failJob(const std::string& message, int exit_code);

}  // namespace ppstage
