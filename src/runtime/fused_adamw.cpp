// See include/ppstage/runtime/fused_adamw.h.
#include "ppstage/runtime/fused_adamw.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/grad_mode.h>

#include <map>
#include <memory>
#include <string>
#include <utility>

#include "ppstage/core/error.h"

namespace ppstage {
namespace {

// One _fused_adamw_ call's tensor lists.
struct Lists {
  std::vector<at::Tensor> params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps;
};

}  // namespace

FusedAdamW::FusedAdamW(std::vector<at::Tensor> params, torch::optim::AdamWOptions options)
    : AdamW(std::move(params), std::move(options)) {}

at::Tensor FusedAdamW::step(LossClosure closure) {
  PPSTAGE_INTERNAL_ASSERT(closure == nullptr, "FusedAdamW::step takes no closure");
  at::NoGradGuard no_grad;
  for (torch::optim::OptimizerParamGroup& group : param_groups()) {
    const auto& options = static_cast<const torch::optim::AdamWOptions&>(group.options());
    // The kernel takes tensors of one device and dtype per call, as torch.optim groups them.
    std::map<std::pair<std::string, at::ScalarType>, Lists> calls;  // by (device, dtype)
    for (const at::Tensor& p : group.params()) {
      if (!p.grad().defined()) continue;
      std::unique_ptr<torch::optim::OptimizerParamState>& slot = state()[p.unsafeGetTensorImpl()];
      if (slot == nullptr) {
        auto fresh = std::make_unique<torch::optim::AdamWParamState>();
        fresh->exp_avg(at::zeros_like(p, at::MemoryFormat::Preserve));
        fresh->exp_avg_sq(at::zeros_like(p, at::MemoryFormat::Preserve));
        if (options.amsgrad()) fresh->max_exp_avg_sq(at::zeros_like(p, at::MemoryFormat::Preserve));
        slot = std::move(fresh);
      }
      auto& s = static_cast<torch::optim::AdamWParamState&>(*slot);
      s.step(s.step() + 1);
      Lists& call = calls[{p.device().str(), p.scalar_type()}];
      call.params.push_back(p);
      call.grads.push_back(p.grad());
      call.exp_avgs.push_back(s.exp_avg());
      call.exp_avg_sqs.push_back(s.exp_avg_sq());
      if (options.amsgrad()) call.max_exp_avg_sqs.push_back(s.max_exp_avg_sq());
      // The kernel reads t from a float32 scalar on the parameter's device (filled there,
      // no copy from the host's memory).
      call.steps.push_back(
          at::full({}, static_cast<double>(s.step()), p.options().dtype(at::kFloat)));
    }
    for (auto& [key, call] : calls) {
      at::_fused_adamw_(call.params, call.grads, call.exp_avgs, call.exp_avg_sqs,
                        call.max_exp_avg_sqs, call.steps, options.lr(),
                        std::get<0>(options.betas()), std::get<1>(options.betas()),
                        options.weight_decay(), options.eps(), options.amsgrad(),
                        /*maximize=*/false);
    }
  }
  return {};
}

}  // namespace ppstage
