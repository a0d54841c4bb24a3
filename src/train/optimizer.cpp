// See include/ppstage/train/optimizer.h.
#include "ppstage/train/optimizer.h"

#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

namespace ppstage {

std::unique_ptr<torch::optim::Optimizer> makeOptimizer(const TrainConfig& train,
                                                       std::vector<at::Tensor> params) {
  if (train.optimizer == OptimizerKind::kSgd) {
    return std::make_unique<torch::optim::SGD>(
        std::move(params), torch::optim::SGDOptions(train.lr).weight_decay(train.weight_decay));
  }
  return std::make_unique<torch::optim::AdamW>(
      std::move(params), torch::optim::AdamWOptions(train.lr).weight_decay(train.weight_decay));
}

void stepAndClear(torch::optim::Optimizer& optimizer, const std::vector<at::Tensor>& params) {
  optimizer.step();
  for (at::Tensor p : params) p.mutable_grad() = at::Tensor();  // p shares the parameter
}

}  // namespace ppstage
