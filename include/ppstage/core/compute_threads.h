// How one process computes: with how many threads (--train.threads), and with denormal
// floats flushed to zero.
#pragma once

namespace ppstage {

// Sets LibTorch's intra-op threads and the BLAS library's own: Debian's LibTorch calls a
// pthreads OpenBLAS, whose thread pool at::set_num_threads does not size (it starts one
// thread per core the process may run on). Without mpirun's core binding, one process
// asked for one thread would otherwise multiply matrices on every core. Also flushes
// denormals (flushDenormals).
void setComputeThreads(int threads);

// Makes this thread's float arithmetic, and that of the threads it starts later (LibTorch's
// intra-op pool; not OpenBLAS's, started when it loads, but the matrices it multiplies come
// from arithmetic that flushes), treat denormal numbers as zero, as
// torch.set_flush_denormal(True) does. A model's tiny values (softmax probabilities of
// tokens it has learnt never to expect, their gradients) become denormal as it trains, and
// each product with one costs the CPU about a hundred cycles: without this, gpt-small's
// steps took 80% longer after 2,000 steps (docs/hardening.md, the soak). Float32 values
// below 1.2e-38 become 0. False where the CPU cannot (x86 without DAZ).
bool flushDenormals();

}  // namespace ppstage
