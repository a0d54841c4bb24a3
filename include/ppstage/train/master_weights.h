// --train.precision bf16: the stages compute in bf16 (their parameter copies, activations
// and the messages between stages), while the optimizer keeps fp32 master weights and its
// state in fp32.
//
// Each step starts with fp32 zeros in the compute parameters' .grad (startStep()): the
// micro-batches' bf16 weight gradients accumulate into them in fp32 (Megatron's main_grad),
// and the dp sum, the tie sum, the norm and clipping that follow are fp32. step() hands
// them to the masters, steps the optimizer over the masters and rounds the masters back
// into the compute parameters.
#pragma once

#include <ATen/core/Tensor.h>

#include <unordered_map>
#include <vector>

namespace torch::optim {
class Optimizer;
}

namespace ppstage {

class MasterWeights {
 public:
  // `compute`: this rank's trainable stage parameters; `masters`: their fp32 values, in
  // the same order (copied, not shared).
  MasterWeights(std::vector<at::Tensor> compute, const std::vector<at::Tensor>& masters);

  // What the optimizer steps: the fp32 masters.
  const std::vector<at::Tensor>& masters() const { return masters_; }

  // fp32 zeros in every compute parameter's .grad, for the step's gradients to add to.
  void startStep();

  // The masters take the (fp32) gradients, the optimizer steps them, the compute
  // parameters get their rounded values; every gradient is dropped.
  void step(torch::optim::Optimizer& optimizer);

  // Drops every gradient without stepping (a skipped step).
  void clearGradients();

  // The master of `compute` (one of the compute parameters); `compute` itself for any
  // other tensor (a buffer, or a parameter without master weights).
  at::Tensor masterOf(const at::Tensor& compute) const;

  // Rounds every master into its compute parameter (after a checkpoint's values were
  // copied into the masters).
  void copyToCompute();

 private:
  std::vector<at::Tensor> compute_;
  std::vector<at::Tensor> masters_;
  std::unordered_map<const c10::TensorImpl*, size_t> index_;
};

}  // namespace ppstage
