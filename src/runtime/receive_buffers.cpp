// See receive_buffers.h.
#include "receive_buffers.h"

#include <ATen/ATen.h>

#include "ppstage/core/error.h"

namespace ppstage {
namespace {

// Nothing but this handle refers to any of `buffers`' memory.
bool unused(const std::vector<at::Tensor>& buffers) {
  for (const at::Tensor& t : buffers) {
    if (t.defined() && (t.use_count() != 1 || t.storage().use_count() != 1)) return false;
  }
  return true;
}

}  // namespace

ReceiveBuffers::ReceiveBuffers(const ActionList& actions,
                               const std::map<ReceivePool, BoundarySpec>& specs,
                               int64_t microbatch_size)
    : microbatch_size_(microbatch_size) {
  for (const auto& [key, held] : receiveBuffersHeld(actions)) {
    const auto spec = specs.find(key);
    PPSTAGE_INTERNAL_ASSERT(spec != specs.end(), "no boundary for the receives of stage ",
                            key.first);
    Pool& p = pools_[key];
    p.spec = spec->second;
    p.gradients = key.second == ActionKind::kRecvBackward;
    for (int i = 0; i < held; ++i) p.free.push_back(allocate(p));
  }
}

std::vector<at::Tensor> ReceiveBuffers::allocate(const Pool& p) {
  ++allocated_;
  std::vector<at::Tensor> buffers;
  for (const TensorSpec& t : p.spec.tensors) {
    const bool received = !p.gradients || t.requires_grad;
    buffers.push_back(received ? at::empty(t.sizes(microbatch_size_), t.dtype) : at::Tensor());
  }
  return buffers;
}

ReceiveBuffers::Pool& ReceiveBuffers::pool(const ReceivePool& key) {
  const auto it = pools_.find(key);
  PPSTAGE_INTERNAL_ASSERT(it != pools_.end(), "no receive buffers for stage ", key.first, " ",
                          kindName(key.second));
  return it->second;
}

std::vector<at::Tensor> ReceiveBuffers::take(const ReceivePool& key) {
  Pool& p = pool(key);
  if (p.free.empty()) return allocate(p);
  std::vector<at::Tensor> buffers = std::move(p.free.back());
  p.free.pop_back();
  return buffers;
}

void ReceiveBuffers::giveBack(const ReceivePool& key, std::vector<at::Tensor> buffers) {
  Pool& p = pool(key);
  (unused(buffers) ? p.free : p.held).push_back(std::move(buffers));
}

void ReceiveBuffers::reclaim() {
  for (auto& [key, p] : pools_) {
    for (std::vector<at::Tensor>& buffers : p.held) {
      if (unused(buffers)) p.free.push_back(std::move(buffers));
    }
    p.held.clear();
  }
}

}  // namespace ppstage
