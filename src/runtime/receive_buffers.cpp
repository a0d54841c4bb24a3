// See receive_buffers.h.
#include "receive_buffers.h"

#include <ATen/ATen.h>
#include <c10/util/accumulate.h>

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
                               int64_t microbatch_size, int64_t max_length, at::Device device)
    : microbatch_size_(microbatch_size), max_length_(max_length), device_(device) {
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
    at::Tensor buffer;
    if (received && max_length_ > 0) {
      buffer = at::empty({c10::multiply_integers(t.sizes(microbatch_size_, max_length_))},
                         at::device(device_).dtype(t.dtype));
    } else if (received) {
      buffer = at::empty(t.sizes(microbatch_size_), at::device(device_).dtype(t.dtype));
    }
    buffers.push_back(buffer);
  }
  return buffers;
}

std::vector<at::Tensor> ReceiveBuffers::viewsAt(const ReceivePool& key,
                                                const std::vector<at::Tensor>& buffers,
                                                int64_t length) {
  if (max_length_ == 0) return buffers;
  PPSTAGE_INTERNAL_ASSERT(length >= 1 && length <= max_length_, "a micro-batch of ", length,
                          " tokens; receive buffers hold ", max_length_);
  const Pool& p = pool(key);
  std::vector<at::Tensor> views;
  for (size_t i = 0; i < buffers.size(); ++i) {
    if (!buffers[i].defined()) {
      views.emplace_back();
      continue;
    }
    const std::vector<int64_t> sizes = p.spec.tensors[i].sizes(microbatch_size_, length);
    views.push_back(buffers[i].narrow(0, 0, c10::multiply_integers(sizes)).view(sizes));
  }
  return views;
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
