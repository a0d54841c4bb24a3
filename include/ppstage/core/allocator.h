// glibc malloc tuning for training loops.
#pragma once

namespace ppstage {

// By default glibc returns large freed blocks to the OS (munmap, trimming) and faults them
// back in on the next step: activations of every step are such blocks, and steps jitter
// several-fold (shared/FACTS.md). Keeps them: mmap only above 32 MiB, trim above 2 GiB,
// grow the heap by 256 MiB. The same as MALLOC_MMAP_THRESHOLD_=33554432
// MALLOC_TRIM_THRESHOLD_=2147483647 MALLOC_TOP_PAD_=268435456. No-op off glibc.
void keepFreedMemoryForReuse();

// Hands the heap's free memory back to the OS now (malloc_trim), so that resident memory
// is what is in use: between runs measured one after another in one process, and after
// each checkpoint save (train/checkpointer.cpp). No-op off glibc.
void releaseFreedMemory();

}  // namespace ppstage
