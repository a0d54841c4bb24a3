// A job in which rank 1 leaves early (MPI_Finalize, exit 0) while rank 0 waits for a message
// from it. Rank 0 must end the job within --comm.timeout_s with an error naming the peer,
// stage and micro-batch, not hang. Run by CTest through expect_failure.sh.
//   mpirun -np 2 mpi_early_exit <timeout seconds>
#include <ATen/ATen.h>

#include <cstdlib>
#include <iostream>
#include <string>

#include "ppstage/comm/mpi_communicator.h"
#include "ppstage/comm/mpi_session.h"

int main(int argc, char** argv) {
  const double timeout_s = argc > 1 ? std::atof(argv[1]) : 2.0;
  auto* mpi = new ppstage::MpiSession();
  auto comm = ppstage::MpiCommunicator::world(
      ppstage::CommOptions{std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000))});
  if (mpi->worldRank() == 1) {
    comm.reset();
    delete mpi;  // MPI_Finalize
    return 0;
  }
  try {
    at::Tensor activation = at::empty({8, 16});
    comm->recvSync(activation, 1, ppstage::MessageTag{ppstage::MessageKind::kActivation, 1, 4, 0});
  } catch (const std::exception& e) {
    std::cerr << "ppstage: error: " << e.what() << std::endl;
    comm->abort(1);  // ends the job: rank 1 is gone, nobody else waits
  }
  return 0;  // not reached: nobody sends
}
