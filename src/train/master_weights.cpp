// See include/ppstage/train/master_weights.h.
#include "ppstage/train/master_weights.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <torch/optim/optimizer.h>

#include "ppstage/core/error.h"

namespace ppstage {

MasterWeights::MasterWeights(std::vector<at::Tensor> compute,
                             const std::vector<at::Tensor>& masters)
    : compute_(std::move(compute)) {
  PPSTAGE_INTERNAL_ASSERT(compute_.size() == masters.size(), compute_.size(), " parameters and ",
                          masters.size(), " masters");
  for (size_t i = 0; i < compute_.size(); ++i) {
    PPSTAGE_INTERNAL_ASSERT(compute_[i].sizes() == masters[i].sizes(), "parameter ", i, " is ",
                            compute_[i].sizes(), ", its master ", masters[i].sizes());
    at::Tensor master = masters[i].detach().to(at::kFloat, /*non_blocking=*/false, /*copy=*/true);
    masters_.push_back(master.requires_grad_(true));  // a leaf whose .grad the optimizer reads
    index_.emplace(compute_[i].unsafeGetTensorImpl(), i);
  }
}

void MasterWeights::startStep() {
  for (at::Tensor& p : compute_) {
    p.mutable_grad() = at::zeros(p.sizes(), p.options().dtype(at::kFloat));
  }
}

void MasterWeights::step(torch::optim::Optimizer& optimizer) {
  for (size_t i = 0; i < compute_.size(); ++i) masters_[i].mutable_grad() = compute_[i].grad();
  optimizer.step();
  copyToCompute();
  clearGradients();
}

void MasterWeights::clearGradients() {
  for (size_t i = 0; i < compute_.size(); ++i) {
    compute_[i].mutable_grad() = at::Tensor();
    masters_[i].mutable_grad() = at::Tensor();
  }
}

at::Tensor MasterWeights::masterOf(const at::Tensor& compute) const {
  const auto it = index_.find(compute.unsafeGetTensorImpl());
  return it == index_.end() ? compute : masters_[it->second];
}

void MasterWeights::copyToCompute() {
  at::NoGradGuard no_grad;
  for (size_t i = 0; i < compute_.size(); ++i) compute_[i].copy_(masters_[i]);
}

}  // namespace ppstage
