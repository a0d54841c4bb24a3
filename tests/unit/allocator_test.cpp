// keepFreedMemoryForReuse against glibc's own accounting (mallinfo): a large block comes
// from the heap instead of its own mmap, and stays in the heap once freed. Needs no
// LibTorch: links ppstage_core only.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

#include "ppstage/core/allocator.h"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace ppstage {
namespace {

#if defined(__GLIBC__)
struct HeapCounts {
  size_t mmapped_blocks;
  size_t heap_bytes;  // the main heap's size: trimming shrinks it
};

HeapCounts heapCounts() {
#if __GLIBC_PREREQ(2, 33)
  const struct mallinfo2 info = mallinfo2();
#else
  const struct mallinfo info = mallinfo();
#endif
  return {static_cast<size_t>(info.hblks), static_cast<size_t>(info.arena)};
}
#endif

TEST(Allocator, KeepsLargeFreedBlocksInTheHeap) {
#if !defined(__GLIBC__)
  GTEST_SKIP() << "malloc tuning is glibc's";
#else
  keepFreedMemoryForReuse();
  // 8 MiB: glibc's defaults would map it on its own (threshold 128 KiB at start) and
  // unmap it on free, so that the next step faults it in again.
  constexpr size_t kBytes = size_t{8} << 20;
  const HeapCounts before = heapCounts();
  // Through a volatile pointer, so that the compiler cannot drop the malloc/free pair.
  void* volatile block = std::malloc(kBytes);
  ASSERT_NE(block, nullptr);
  std::memset(block, 1, kBytes);
  const HeapCounts held = heapCounts();
  EXPECT_EQ(held.mmapped_blocks, before.mmapped_blocks) << "the block was mmapped";
  std::free(block);
  EXPECT_EQ(heapCounts().heap_bytes, held.heap_bytes) << "the heap was trimmed";
#endif
}

}  // namespace
}  // namespace ppstage
