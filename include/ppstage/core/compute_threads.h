// How many threads one process computes with (--train.threads).
#pragma once

namespace ppstage {

// Sets LibTorch's intra-op threads and the BLAS library's own: Debian's LibTorch calls a
// pthreads OpenBLAS, whose thread pool at::set_num_threads does not size (it starts one
// thread per core the process may run on). Without mpirun's core binding, one process
// asked for one thread would otherwise multiply matrices on every core.
void setComputeThreads(int threads);

}  // namespace ppstage
