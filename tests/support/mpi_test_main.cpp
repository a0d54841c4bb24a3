// GoogleTest main for tests run under mpirun: MPI lives for the whole run (MpiSession), one
// intra-op thread per rank. Every rank runs every test; a failure on any rank fails the job.
#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include "ppstage/comm/mpi_session.h"

int main(int argc, char** argv) {
  ppstage::MpiSession mpi;
  at::set_num_threads(1);
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
