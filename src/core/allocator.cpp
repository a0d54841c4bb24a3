// See include/ppstage/core/allocator.h.
#include "ppstage/core/allocator.h"

#include <cstdlib>  // defines __GLIBC__ where the C library is glibc: test it only after this

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace ppstage {

void keepFreedMemoryForReuse() {
#if defined(__GLIBC__)
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, static_cast<int>(0x7fffffff));  // int: 2 GiB is the most it takes
  mallopt(M_TOP_PAD, 256 << 20);
#endif
}

void releaseFreedMemory() {
#if defined(__GLIBC__)
  malloc_trim(0);
#endif
}

}  // namespace ppstage
