// See include/ppstage/comm/mpi_session.h.
#include "ppstage/comm/mpi_session.h"

#include <mpi.h>

#include "ppstage/comm/communicator.h"
#include "ppstage/comm/failure_channel.h"
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
  failure_channel_ = std::make_unique<FailureChannel>();
}

MpiSession::~MpiSession() {
  if (!mpiActive()) return;
  failure_channel_.reset();
  MPI_Finalize();
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

int mpiWorldSize() {
  if (!mpiActive()) return 1;
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return size;
}

}  // namespace ppstage
