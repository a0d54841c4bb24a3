// See include/ppstage/runtime/optimizer.h.
#include "ppstage/runtime/optimizer.h"

#include <ATen/ATen.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

#include <sstream>
#include <type_traits>

#include "ppstage/core/error.h"
#include "ppstage/core/text.h"
#include "ppstage/runtime/fused_adamw.h"

namespace ppstage {
namespace {

// torch::optim keys its state by the parameter's TensorImpl: as a pointer in LibTorch 2.x,
// as the pointer printed to a string in 1.13 (c10::guts::to_string).
template <typename StateMap>
typename StateMap::key_type stateKey(const at::Tensor& param) {
  if constexpr (std::is_same_v<typename StateMap::key_type, std::string>) {
    std::ostringstream key;
    key << param.unsafeGetTensorImpl();
    return key.str();
  } else {
    return param.unsafeGetTensorImpl();
  }
}

template <typename StateMap>
torch::optim::OptimizerParamState* findState(StateMap& states, const at::Tensor& param) {
  const auto it = states.find(stateKey<StateMap>(param));
  return it == states.end() ? nullptr : it->second.get();
}

// A copy of state[name] on the parameter's device, checked against its shape (or a scalar
// for "step").
at::Tensor stateTensor(const std::map<std::string, at::Tensor>& state, const std::string& name,
                       const at::Tensor& param, const std::string& path) {
  const auto it = state.find(name);
  PPSTAGE_CHECK(it != state.end(), "optimizer state of ", path, " has no '", name, "'");
  const std::vector<int64_t> want = name == "step" ? std::vector<int64_t>{} : param.sizes().vec();
  PPSTAGE_CHECK(it->second.sizes().vec() == want, "optimizer state '", name, "' of ", path,
                ": checkpoint has ", shapeText(it->second.sizes().vec()), ", model has ",
                shapeText(want));
  return it->second.to(param.device(), /*non_blocking=*/false, /*copy=*/true);
}

}  // namespace

std::unique_ptr<torch::optim::Optimizer> makeOptimizer(const TrainConfig& train,
                                                       std::vector<at::Tensor> params) {
  if (train.optimizer == OptimizerKind::kSgd) {
    return std::make_unique<torch::optim::SGD>(std::move(params),
                                               torch::optim::SGDOptions(train.lr)
                                                   .momentum(train.momentum)
                                                   .weight_decay(train.weight_decay));
  }
  const auto options = torch::optim::AdamWOptions(train.lr).weight_decay(train.weight_decay);
  if (!params.empty() && params.front().is_cuda()) {
    return std::make_unique<FusedAdamW>(std::move(params), options);
  }
  return std::make_unique<torch::optim::AdamW>(std::move(params), options);
}

void stepAndClear(torch::optim::Optimizer& optimizer, const std::vector<at::Tensor>& params) {
  optimizer.step();
  clearGradients(params);
}

void setLearningRate(torch::optim::Optimizer& optimizer, double lr) {
  for (torch::optim::OptimizerParamGroup& group : optimizer.param_groups()) {
    group.options().set_lr(lr);
  }
}

void clearGradients(const std::vector<at::Tensor>& params) {
  for (at::Tensor p : params) p.mutable_grad() = at::Tensor();  // p shares the parameter
}

std::map<std::string, at::Tensor> optimizerState(torch::optim::Optimizer& optimizer,
                                                 const at::Tensor& param) {
  torch::optim::OptimizerParamState* state = findState(optimizer.state(), param);
  std::map<std::string, at::Tensor> named;
  if (auto* adamw = dynamic_cast<torch::optim::AdamWParamState*>(state)) {
    named["step"] = at::scalar_tensor(adamw->step(), at::kLong);
    named["exp_avg"] = adamw->exp_avg();
    named["exp_avg_sq"] = adamw->exp_avg_sq();
    if (adamw->max_exp_avg_sq().defined()) named["max_exp_avg_sq"] = adamw->max_exp_avg_sq();
  } else if (auto* sgd = dynamic_cast<torch::optim::SGDParamState*>(state)) {
    named["momentum_buffer"] = sgd->momentum_buffer();
  }
  return named;
}

void setOptimizerState(torch::optim::Optimizer& optimizer, const at::Tensor& param,
                       const std::map<std::string, at::Tensor>& state, const std::string& path) {
  auto& states = optimizer.state();
  using StateMap = std::remove_reference_t<decltype(states)>;
  if (state.empty()) {
    states.erase(stateKey<StateMap>(param));
    return;
  }
  if (dynamic_cast<torch::optim::AdamW*>(&optimizer) != nullptr) {
    auto adamw = std::make_unique<torch::optim::AdamWParamState>();
    adamw->step(stateTensor(state, "step", param, path).item<int64_t>());
    adamw->exp_avg(stateTensor(state, "exp_avg", param, path));
    adamw->exp_avg_sq(stateTensor(state, "exp_avg_sq", param, path));
    if (state.count("max_exp_avg_sq") > 0) {
      adamw->max_exp_avg_sq(stateTensor(state, "max_exp_avg_sq", param, path));
    }
    states[stateKey<StateMap>(param)] = std::move(adamw);
    return;
  }
  auto sgd = std::make_unique<torch::optim::SGDParamState>();
  sgd->momentum_buffer(stateTensor(state, "momentum_buffer", param, path));
  states[stateKey<StateMap>(param)] = std::move(sgd);
}

}  // namespace ppstage
