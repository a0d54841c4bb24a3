// See include/ppstage/comm/mpi_session.h.
#include "ppstage/comm/mpi_session.h"

#include <mpi.h>

#include <cstdlib>
#include <iostream>

#include "ppstage/comm/communicator.h"
#include "ppstage/core/error.h"

namespace ppstage {

MpiSession::MpiSession() {
  PPSTAGE_CHECK(!mpiActive(), "MPI is already initialized");
  int provided = MPI_THREAD_SINGLE;
  if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS) {
    throw CommError("MPI_Init_thread failed");
  }
  if (provided < MPI_THREAD_SERIALIZED) {
    MPI_Finalize();
    throw CommError(detail::concat("MPI provides thread level ", provided,
                                   ", ppstage needs MPI_THREAD_SERIALIZED (", MPI_THREAD_SERIALIZED,
                                   ")"));
  }
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
}

MpiSession::~MpiSession() {
  if (mpiActive()) MPI_Finalize();
}

bool mpiActive() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  return initialized && !finalized;
}

int mpiWorldRank() {
  if (!mpiActive()) return -1;
  int rank = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

void mpiAbortWorld(int exit_code) {
  if (mpiActive()) MPI_Abort(MPI_COMM_WORLD, exit_code);
  std::_Exit(exit_code);
}

}  // namespace ppstage

namespace ppstage {

void failJob(const std::string& message, int exit_code) {
  std::string line = message;
  for (char& c : line) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  const int rank = mpiWorldRank();
  std::cerr << "ppstage: error: " << (rank >= 0 ? "[rank " + std::to_string(rank) + "] " : "")
            << line << std::endl;
  if (rank >= 0) mpiAbortWorld(exit_code);
  std::exit(exit_code);
}

}  // namespace ppstage
