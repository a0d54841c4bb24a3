// See include/ppstage/observe/tensor_memory.h.
#include "ppstage/observe/tensor_memory.h"

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#ifdef PPSTAGE_WITH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#endif

#include <atomic>
#include <cstring>
#include <mutex>

#include "ppstage/core/error.h"

namespace ppstage {
namespace {

std::atomic<int64_t> g_now{0};
std::atomic<int64_t> g_peak{0};
std::atomic<bool> g_installed{false};

void raisePeak(int64_t value) {
  int64_t peak = g_peak.load(std::memory_order_relaxed);
  while (value > peak && !g_peak.compare_exchange_weak(peak, value, std::memory_order_relaxed)) {
  }
}

// Each counted block is the wrapped allocator's raw block with a header in front that
// holds its size: the DataPtr's data is also its context (code such as
// Allocator::raw_allocate, used by some CPU kernels, requires that), and the deleter
// finds the size from the pointer alone. 64 bytes keep the data as aligned as the block.
constexpr size_t kHeader = 64;
c10::Allocator* g_inner = nullptr;

void freeCounted(void* data) {
  if (data == nullptr) return;
  void* block = static_cast<char*>(data) - kHeader;
  int64_t bytes = 0;
  std::memcpy(&bytes, block, sizeof(bytes));
  g_now.fetch_sub(bytes, std::memory_order_relaxed);
  g_inner->raw_deallocate(block);
}

c10::DataPtr allocateCounted(size_t n) {
  void* block = g_inner->raw_allocate(n + kHeader);
  const auto bytes = static_cast<int64_t>(n);
  std::memcpy(block, &bytes, sizeof(bytes));
  raisePeak(g_now.fetch_add(bytes, std::memory_order_relaxed) + bytes);
  void* data = static_cast<char*>(block) + kHeader;
  return c10::DataPtr(data, data, &freeCounted, c10::Device(c10::DeviceType::CPU));
}

// c10::Allocator changed between LibTorch 1.13 (allocate() const) and 2.x (allocate()
// non-const, copy_data() pure virtual): both allocate()s are declared, so that whichever
// the base has is overridden, and copy_data too.
class CountingAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t n) const { return allocateCounted(n); }
  c10::DataPtr allocate(size_t n) { return allocateCounted(n); }
  c10::DeleterFnPtr raw_deleter() const override { return &freeCounted; }
  void copy_data(void* dest, const void* src, size_t count) const {
    if (count > 0) std::memcpy(dest, src, count);
  }
};

}  // namespace

void installCountingAllocator() {
  static std::once_flag once;
  std::call_once(once, [] {
    g_inner = c10::GetAllocator(c10::DeviceType::CPU);
    if (g_inner == nullptr || g_inner->raw_deleter() == nullptr) return;  // cannot wrap it
    static CountingAllocator counting;
    c10::SetAllocator(c10::DeviceType::CPU, &counting, /*priority=*/100);
    g_installed = true;
  });
}

bool countingAllocatorInstalled() { return g_installed; }

int64_t tensorBytesNow() { return g_now.load(std::memory_order_relaxed); }

int64_t tensorBytesPeak() { return g_peak.load(std::memory_order_relaxed); }

void resetTensorBytesPeak() { g_peak.store(g_now.load(std::memory_order_relaxed)); }

namespace {

#ifdef PPSTAGE_WITH_CUDA
const c10::CachingDeviceAllocator::Stat& allocatedOn(const c10::Device& device) {
  static thread_local c10::CachingDeviceAllocator::DeviceStats stats;
  stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device.index());
  return stats.allocated_bytes[static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE)];
}
#endif

}  // namespace

int64_t tensorBytesNow(const c10::Device& device) {
#ifdef PPSTAGE_WITH_CUDA
  if (device.is_cuda()) return allocatedOn(device).current;
#endif
  PPSTAGE_INTERNAL_ASSERT(device.is_cpu(), "tensor memory of ", device.str());
  return tensorBytesNow();
}

int64_t tensorBytesPeak(const c10::Device& device) {
#ifdef PPSTAGE_WITH_CUDA
  if (device.is_cuda()) return allocatedOn(device).peak;
#endif
  PPSTAGE_INTERNAL_ASSERT(device.is_cpu(), "tensor memory of ", device.str());
  return tensorBytesPeak();
}

void resetTensorBytesPeak(const c10::Device& device) {
#ifdef PPSTAGE_WITH_CUDA
  if (device.is_cuda()) return c10::cuda::CUDACachingAllocator::resetPeakStats(device.index());
#endif
  PPSTAGE_INTERNAL_ASSERT(device.is_cpu(), "tensor memory of ", device.str());
  resetTensorBytesPeak();
}

}  // namespace ppstage
