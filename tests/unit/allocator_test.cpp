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
// Through a volatile pointer, so that the compiler cannot drop the malloc/free pair.
void* volatile g_block = nullptr;

struct HeapCounts {
  size_t mmapped_blocks;
  size_t free_heap_bytes;
};

HeapCounts heapCounts() {
#if __GLIBC_PREREQ(2, 33)
  const struct mallinfo2 info = mallinfo2();
#else
  const struct mallinfo info = mallinfo();
#endif
  return {static_cast<size_t>(info.hblks), static_cast<size_t>(info.fordblks)};
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
  g_block = std::malloc(kBytes);
  ASSERT_NE(g_block, nullptr);
  std::memset(g_block, 1, kBytes);
  EXPECT_EQ(heapCounts().mmapped_blocks, before.mmapped_blocks) << "the block was mmapped";
  std::free(g_block);
  EXPECT_GE(heapCounts().free_heap_bytes, kBytes) << "the freed block was trimmed";
#endif
}

}  // namespace
}  // namespace ppstage
