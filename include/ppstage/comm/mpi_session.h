// MPI's lifetime in a ppstage process, and the few world-level calls the CLI needs. mpi.h
// stays out of public headers.
//
// Note [MPI thread level]
// ~~~~~~~~~~~~~~~~~~~~~~~
// ppstage asks for MPI_THREAD_SERIALIZED: the Communicator contract lets any thread call a
// communicator (one call at a time), so MPI must tolerate calls from different threads, but
// MpiCommunicator serializes its MPI calls with a mutex, so MPI never sees two at once and
// we avoid MPI_THREAD_MULTIPLE's per-call locking inside the library. Today every call
// comes from the thread that runs the steps. Progress happens when a Work is tested or
// waited on; with Open MPI's shared-memory transport the receiver pulls large messages
// itself (single copy), so the sender need not be inside MPI.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "ppstage/core/cpu_layout.h"

namespace ppstage {

class FailureChannel;

class MpiSession {
 public:
  // MPI_Init_thread(MPI_THREAD_SERIALIZED), then the failure-report channel (Note [Failure
  // reports]). Throws CommError when MPI is already active or
  // provides less than that level.
  MpiSession();
  ~MpiSession();  // closes the channel, MPI_Finalize
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;

  int worldRank() const { return rank_; }
  int worldSize() const { return size_; }

 private:
  int rank_ = 0;
  int size_ = 1;
  std::unique_ptr<FailureChannel> failure_channel_;  // freed before MPI_Finalize
};

// True between MPI_Init and MPI_Finalize.
bool mpiActive();
// This process's rank in MPI_COMM_WORLD; -1 when MPI is not active.
int mpiWorldRank();
// World rank `rank` as errors name it: "rank 1", and where the job's ranks run on more
// than one host (mpiHostOfRanks), with its host's name: "rank 1 (host h1)".
std::string mpiRankName(int rank);
// Every world rank's host name, in rank order (empty outside a session).
const std::vector<std::string>& mpiHostNames();
// Every world rank's host, numbered 0, 1, ... in the order of each host's first rank: the
// ranks that share memory (MPI_Comm_split_type(MPI_COMM_TYPE_SHARED), as mpirun places
// them on nodes). Empty outside a session.
const std::vector<int>& mpiHostOfRanks();
// Every world rank's machine and that machine's cores (core/cpu_layout.h), each rank
// computing with `threads_per_rank` threads. Empty outside a session.
CpuLayout mpiCpuLayout(int threads_per_rank);
// The number of processes in MPI_COMM_WORLD; 1 when MPI is not active.
int mpiWorldSize();

}  // namespace ppstage
