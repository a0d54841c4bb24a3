// See include/ppstage/core/compute_threads.h.
#include "ppstage/core/compute_threads.h"

#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <dlfcn.h>

namespace ppstage {

void setComputeThreads(int threads) {
  flushDenormals();  // first: the threads started below inherit it
  at::set_num_threads(threads);
  // Looked up rather than linked: ppstage builds against any BLAS LibTorch was built with
  // (MKL, which at::set_num_threads sizes, has no such symbol).
  using SetThreads = void (*)(int);
  if (auto set = reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"))) {
    set(threads);
  }
}

bool flushDenormals() { return at::globalContext().setFlushDenormal(true); }

}  // namespace ppstage
