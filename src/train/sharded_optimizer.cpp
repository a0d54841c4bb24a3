// See include/ppstage/train/sharded_optimizer.h, Note [Sharded optimizer state].
#include "ppstage/train/sharded_optimizer.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <torch/optim/optimizer.h>

#include <algorithm>
#include <set>

#include "ppstage/comm/communicator.h"
#include "ppstage/comm/ring_all_reduce.h"
#include "ppstage/core/all_reduce_buckets.h"
#include "ppstage/core/error.h"
#include "ppstage/runtime/optimizer.h"

namespace ppstage {

struct ShardedOptimizer::Bucket {
  std::vector<size_t> params;    // indices into params_, in order
  std::vector<int64_t> offsets;  // each one's first element in the bucket's row
  int64_t elements = 0;
  int64_t owned_begin = 0;  // this rank's chunk of the row
  int64_t owned_end = 0;
  at::Tensor summed;  // the step's gradient sum over the replicas, of the chunk (fp32)
  at::Tensor master;  // the chunk's fp32 values: a leaf the optimizer steps

  int64_t owned() const { return owned_end - owned_begin; }
};

namespace {

// An empty fp32 row of `elements` on `like`'s device.
at::Tensor rowLike(const at::Tensor& like, int64_t elements) {
  return at::empty({elements}, like.options().dtype(at::kFloat));
}

}  // namespace

ShardedOptimizer::ShardedOptimizer(const TrainConfig& train, std::vector<at::Tensor> params,
                                   const std::vector<at::Tensor>& values, Communicator& dp)
    : params_(std::move(params)), dp_(dp) {
  PPSTAGE_INTERNAL_ASSERT(params_.size() == values.size(), params_.size(), " parameters and ",
                          values.size(), " values");
  constexpr int64_t kBucketElements = kAllReduceBucketBytes / 4;  // fp32
  for (size_t i = 0; i < params_.size(); ++i) {
    const int64_t n = params_[i].numel();
    if (buckets_.empty() ||
        (buckets_.back().elements > 0 && buckets_.back().elements + n > kBucketElements)) {
      buckets_.emplace_back();
    }
    Bucket& b = buckets_.back();
    b.params.push_back(i);
    b.offsets.push_back(b.elements);
    b.elements += n;
  }
  std::vector<at::Tensor> masters;
  at::NoGradGuard no_grad;
  for (Bucket& b : buckets_) {
    b.owned_begin = ringOwnedOffset(b.elements, dp_.rank(), dp_.size());
    b.owned_end = b.owned_begin + ringOwnedElements(b.elements, dp_.rank(), dp_.size());
    at::Tensor row = rowLike(params_[b.params[0]], b.elements);
    for (size_t k = 0; k < b.params.size(); ++k) {
      const at::Tensor& value = values.at(b.params[k]);
      row.narrow(0, b.offsets[k], value.numel()).copy_(value.reshape(-1));
    }
    b.master = row.narrow(0, b.owned_begin, b.owned()).clone().requires_grad_(true);
    masters.push_back(b.master);
  }
  optimizer_ = makeOptimizer(train, masters);
}

ShardedOptimizer::~ShardedOptimizer() = default;

void ShardedOptimizer::reduceGradients(const std::vector<bool>& summed) {
  at::NoGradGuard no_grad;
  for (Bucket& b : buckets_) {
    at::Tensor row = rowLike(params_[b.params[0]], b.elements);
    for (size_t k = 0; k < b.params.size(); ++k) {
      const at::Tensor& p = params_[b.params[k]];
      at::Tensor slot = row.narrow(0, b.offsets[k], p.numel());
      const bool passes = !summed.empty() && summed.at(b.params[k]);
      if (p.grad().defined() && (!passes || dp_.rank() == 0)) {
        slot.copy_(p.grad().reshape(-1));
      } else {
        slot.zero_();
      }
    }
    ringReduceScatterSum(dp_, row);
    b.summed = row.narrow(0, b.owned_begin, b.owned()).clone();  // the rest of the row goes
  }
}

double ShardedOptimizer::squaredNormShare(const std::vector<bool>& counts) const {
  std::vector<at::Tensor> squares;
  for (const Bucket& b : buckets_) {
    if (!b.summed.defined()) continue;
    for (size_t k = 0; k < b.params.size(); ++k) {
      if (!counts.at(b.params[k])) continue;
      const int64_t begin = std::max(b.offsets[k], b.owned_begin);
      const int64_t end = std::min(b.offsets[k] + params_[b.params[k]].numel(), b.owned_end);
      if (end <= begin) continue;
      squares.push_back(
          b.summed.narrow(0, begin - b.owned_begin, end - begin).to(at::kDouble).pow(2).sum());
    }
  }
  if (squares.empty()) return 0;
  const at::Tensor host = at::stack(squares).cpu();
  const double* square = host.data_ptr<double>();
  double sum = 0;
  for (size_t i = 0; i < squares.size(); ++i) sum += square[i];
  return sum;
}

void ShardedOptimizer::scale(double factor) {
  for (Bucket& b : buckets_) {
    if (b.summed.defined()) b.summed.mul_(factor);
  }
}

void ShardedOptimizer::step(double lr) {
  setLearningRate(*optimizer_, lr);
  for (Bucket& b : buckets_) {
    b.master.mutable_grad() =
        b.summed.defined() ? b.summed : at::zeros_like(b.master, b.master.options());
  }
  optimizer_->step();
  at::NoGradGuard no_grad;
  for (Bucket& b : buckets_) {
    at::Tensor row = rowLike(params_[b.params[0]], b.elements);
    row.narrow(0, b.owned_begin, b.owned()).copy_(b.master);
    ringAllGather(dp_, row);
    for (size_t k = 0; k < b.params.size(); ++k) {
      at::Tensor& p = params_[b.params[k]];
      p.copy_(row.narrow(0, b.offsets[k], p.numel()).view(p.sizes()));
    }
  }
  clearGradients();
}

void ShardedOptimizer::clearGradients() {
  for (at::Tensor p : params_) p.mutable_grad() = at::Tensor();
  for (Bucket& b : buckets_) {
    b.summed = at::Tensor();
    b.master.mutable_grad() = at::Tensor();
  }
}

ShardedOptimizer::WholeState ShardedOptimizer::gatherState() {
  WholeState whole;
  whole.state.resize(params_.size());
  whole.masters.resize(params_.size());
  at::NoGradGuard no_grad;
  // Gathers `chunk` (this rank's part of bucket `b`'s row) and cuts the row per parameter.
  const auto gathered = [&](const Bucket& b, const at::Tensor& chunk) {
    at::Tensor row = rowLike(params_[b.params[0]], b.elements).zero_();
    row.narrow(0, b.owned_begin, b.owned()).copy_(chunk);
    ringAllGather(dp_, row);
    std::vector<at::Tensor> out;
    for (size_t k = 0; k < b.params.size(); ++k) {
      const at::Tensor& p = params_[b.params[k]];
      out.push_back(row.narrow(0, b.offsets[k], p.numel()).view(p.sizes()).clone());
    }
    return out;
  };
  for (const Bucket& b : buckets_) {
    const std::vector<at::Tensor> masters = gathered(b, b.master.detach());
    for (size_t k = 0; k < b.params.size(); ++k) whole.masters[b.params[k]] = masters[k];
    // Every replica steps together, so every chunk has the same names (none before a step).
    for (const auto& [name, tensor] : optimizerState(*optimizer_, b.master)) {
      if (tensor.dim() == 0) {  // AdamW's step count
        for (size_t k : b.params) whole.state[k][name] = tensor.clone();
        continue;
      }
      const std::vector<at::Tensor> parts = gathered(b, tensor.to(at::kFloat));
      for (size_t k = 0; k < b.params.size(); ++k) whole.state[b.params[k]][name] = parts[k];
    }
  }
  return whole;
}

void ShardedOptimizer::loadState(const WholeState& whole) {
  PPSTAGE_INTERNAL_ASSERT(
      whole.masters.size() == params_.size() && whole.state.size() == params_.size(), "state of ",
      whole.masters.size(), " parameters for ", params_.size());
  at::NoGradGuard no_grad;
  for (size_t i = 0; i < buckets_.size(); ++i) {
    Bucket& b = buckets_[i];
    // This rank's chunk of the row the parameters' `part` tensors make.
    const auto chunkOf = [&](const auto& part) {
      at::Tensor row = rowLike(params_[b.params[0]], b.elements);
      for (size_t k = 0; k < b.params.size(); ++k) {
        const at::Tensor& value = part(b.params[k]);
        row.narrow(0, b.offsets[k], value.numel()).copy_(value.reshape(-1));
      }
      return row.narrow(0, b.owned_begin, b.owned()).clone();
    };
    b.master.copy_(chunkOf([&](size_t p) { return whole.masters[p]; }));
    for (size_t k = 0; k < b.params.size(); ++k) {
      at::Tensor& p = params_[b.params[k]];
      p.copy_(whole.masters[b.params[k]].to(p.device()).view(p.sizes()));
    }
    std::map<std::string, at::Tensor> state;
    for (const auto& [name, tensor] : whole.state[b.params[0]]) {
      state[name] = tensor.dim() == 0 ? tensor.clone()
                                      : chunkOf([&](size_t p) { return whole.state[p].at(name); });
    }
    setOptimizerState(*optimizer_, b.master, state, "bucket " + std::to_string(i));
  }
}

int64_t ShardedOptimizer::stateBytes() const {
  int64_t bytes = 0;
  for (const Bucket& b : buckets_) {
    for (const auto& [name, tensor] : optimizerState(*optimizer_, b.master)) {
      bytes += static_cast<int64_t>(tensor.nbytes());
    }
  }
  return bytes;
}

int64_t ShardedOptimizer::masterBytes() const {
  int64_t bytes = 0;
  for (const Bucket& b : buckets_) bytes += static_cast<int64_t>(b.master.nbytes());
  return bytes;
}

}  // namespace ppstage
