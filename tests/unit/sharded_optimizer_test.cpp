// ShardedOptimizer (train/sharded_optimizer.h, Note [Sharded optimizer state]) on ranks as
// threads, against one unsharded optimizer over the summed gradients: the same parameters
// after AdamW and SGD steps with clipping, the same whole state gathered, state that loads
// at another replica count and steps on as before, and state bytes per rank of 1/dp.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/optim/optimizer.h>

#include <map>
#include <mutex>
#include <vector>

#include "ppstage/comm/communicator.h"
#include "ppstage/runtime/optimizer.h"
#include "ppstage/train/gradient_sync.h"
#include "ppstage/train/sharded_optimizer.h"
#include "support/local_ranks.h"

namespace ppstage {
namespace {

using test::runRanks;

const std::vector<std::vector<int64_t>> kShapes = {{5, 3}, {7}, {1}, {4, 4}, {9}};

std::vector<at::Tensor> startValues(const std::vector<std::vector<int64_t>>& shapes) {
  std::vector<at::Tensor> values;
  for (size_t i = 0; i < shapes.size(); ++i) {
    values.push_back(
        at::linspace(-1, 1, c10::multiply_integers(shapes[i]), at::kFloat).reshape(shapes[i]) *
        static_cast<double>(i + 1));
  }
  return values;
}

// Rank `rank`'s gradient of parameter `i` at `step`: different on every rank and step.
at::Tensor gradientOf(const at::Tensor& like, size_t i, int rank, int step) {
  return at::sin(at::arange(like.numel(), at::kFloat) * 0.37 + 0.11 * rank + 0.7 * step +
                 0.05 * static_cast<double>(i))
      .reshape(like.sizes());
}

std::vector<at::Tensor> leaves(const std::vector<at::Tensor>& values) {
  std::vector<at::Tensor> out;
  for (const at::Tensor& v : values) out.push_back(v.clone().requires_grad_(true));
  return out;
}

TrainConfig trainConfig(OptimizerKind kind) {
  TrainConfig train;
  train.optimizer = kind;
  train.lr = 0.05;
  train.weight_decay = 0.01;
  train.momentum = 0.9;
  return train;
}

constexpr double kMaxNorm = 1.0;

// `steps` steps of one optimizer over the gradients summed over `ranks` ranks, clipped.
std::vector<at::Tensor> reference(OptimizerKind kind, int ranks, int steps,
                                  torch::optim::Optimizer** keep = nullptr) {
  static std::unique_ptr<torch::optim::Optimizer> kept;
  std::vector<at::Tensor> params = leaves(startValues(kShapes));
  kept = makeOptimizer(trainConfig(kind), params);
  for (int step = 0; step < steps; ++step) {
    double norm = 0;
    for (size_t i = 0; i < params.size(); ++i) {
      at::Tensor sum = at::zeros_like(params[i]);
      for (int r = 0; r < ranks; ++r) sum += gradientOf(params[i], i, r, step);
      params[i].mutable_grad() = sum;
      norm += sum.to(at::kDouble).pow(2).sum().item<double>();
    }
    const double coefficient = clipCoefficient(std::sqrt(norm), kMaxNorm);
    for (at::Tensor& p : params) p.mutable_grad().mul_(coefficient);
    kept->step();
  }
  if (keep != nullptr) *keep = kept.get();
  return params;
}

// `steps` steps of a ShardedOptimizer on this rank (starting after `done` steps).
void shardedSteps(ShardedOptimizer& sharded, std::vector<at::Tensor>& params, Communicator& comm,
                  int done, int steps) {
  const std::vector<bool> counts(params.size(), true);
  for (int step = done; step < done + steps; ++step) {
    for (size_t i = 0; i < params.size(); ++i) {
      params[i].mutable_grad() = gradientOf(params[i], i, comm.rank(), step);
    }
    sharded.reduceGradients();
    at::Tensor norm = at::full({1}, sharded.squaredNormShare(counts), at::kDouble);
    comm.allReduceSum({norm});
    sharded.scale(clipCoefficient(std::sqrt(norm.item<double>()), kMaxNorm));
    sharded.step(0.05);
  }
}

void expectClose(const at::Tensor& got, const at::Tensor& want, const std::string& what) {
  ASSERT_EQ(got.sizes(), want.sizes()) << what;
  const double diff = (got.to(at::kDouble) - want.to(at::kDouble)).abs().max().item<double>();
  const double scale = std::max(1.0, want.abs().max().item<double>());
  EXPECT_LE(diff / scale, 1e-6) << what;
}

TEST(ShardedOptimizer, StepsAsOneOptimizerOverTheSummedGradients) {
  for (const OptimizerKind kind : {OptimizerKind::kAdamW, OptimizerKind::kSgd}) {
    for (const int ranks : {2, 3}) {
      const std::vector<at::Tensor> want = reference(kind, ranks, 3);
      runRanks(ranks, [&](int rank, Communicator& comm) {
        std::vector<at::Tensor> params = leaves(startValues(kShapes));
        ShardedOptimizer sharded(trainConfig(kind), params, params, comm);
        shardedSteps(sharded, params, comm, 0, 3);
        for (size_t i = 0; i < params.size(); ++i) {
          expectClose(params[i], want[i],
                      std::to_string(ranks) + " ranks, rank " + std::to_string(rank) +
                          ", parameter " + std::to_string(i));
          EXPECT_FALSE(params[i].grad().defined());
        }
      });
    }
  }
}

// The whole state gathered at 3 replicas is the unsharded optimizer's; loaded at 2, the
// next step is the unsharded optimizer's next step.
TEST(ShardedOptimizer, WholeStateGathersAndLoadsAtAnotherReplicaCount) {
  torch::optim::Optimizer* one = nullptr;
  const std::vector<at::Tensor> after_two = reference(OptimizerKind::kAdamW, 3, 2, &one);
  std::vector<std::map<std::string, at::Tensor>> want_state;
  for (const at::Tensor& p : after_two) want_state.push_back(optimizerState(*one, p));
  ShardedOptimizer::WholeState saved;
  std::mutex saving;
  runRanks(3, [&](int rank, Communicator& comm) {
    std::vector<at::Tensor> params = leaves(startValues(kShapes));
    ShardedOptimizer sharded(trainConfig(OptimizerKind::kAdamW), params, params, comm);
    shardedSteps(sharded, params, comm, 0, 2);
    ShardedOptimizer::WholeState whole = sharded.gatherState();
    for (size_t i = 0; i < params.size(); ++i) {
      expectClose(whole.masters[i], after_two[i], "master " + std::to_string(i));
      for (const auto& [name, tensor] : want_state[i]) {
        expectClose(whole.state[i].at(name), tensor, name + " of " + std::to_string(i));
      }
    }
    const std::lock_guard<std::mutex> lock(saving);
    if (rank == 0) saved = whole;
  });
  // A third step from the saved state, on 2 replicas whose gradients sum as 3 did.
  const std::vector<at::Tensor> after_three = reference(OptimizerKind::kAdamW, 3, 3);
  runRanks(2, [&](int rank, Communicator& comm) {
    std::vector<at::Tensor> params = leaves(startValues(kShapes));
    ShardedOptimizer sharded(trainConfig(OptimizerKind::kAdamW), params, params, comm);
    sharded.loadState(saved);
    for (size_t i = 0; i < params.size(); ++i) {
      // Rank 0 carries what ranks 0 and 2 gave; rank 1 rank 1's.
      at::Tensor g = gradientOf(params[i], i, rank, 2);
      if (rank == 0) g += gradientOf(params[i], i, 2, 2);
      params[i].mutable_grad() = g;
    }
    sharded.reduceGradients();
    at::Tensor norm =
        at::full({1}, sharded.squaredNormShare(std::vector<bool>(5, true)), at::kDouble);
    comm.allReduceSum({norm});
    sharded.scale(clipCoefficient(std::sqrt(norm.item<double>()), kMaxNorm));
    sharded.step(0.05);
    for (size_t i = 0; i < params.size(); ++i) {
      expectClose(params[i], after_three[i], "after resuming, parameter " + std::to_string(i));
    }
  });
}

// Two parameters over two buckets (kAllReduceBucketBytes of fp32 each at most): each rank
// keeps two AdamW moments and a master of half of each bucket.
TEST(ShardedOptimizer, KeepsOneReplicasShareOfTheState) {
  const std::vector<std::vector<int64_t>> shapes = {{3000000}, {2000001}};
  std::vector<int64_t> bytes(2);
  runRanks(2, [&](int rank, Communicator& comm) {
    std::vector<at::Tensor> params = leaves(startValues(shapes));
    ShardedOptimizer sharded(trainConfig(OptimizerKind::kAdamW), params, params, comm);
    for (size_t i = 0; i < params.size(); ++i) params[i].mutable_grad() = at::ones_like(params[i]);
    sharded.reduceGradients();
    sharded.step(0.05);
    for (const at::Tensor& p : params) EXPECT_EQ(p.grad().defined(), false);
    bytes[static_cast<size_t>(rank)] = sharded.stateBytes();
    EXPECT_LE(std::llabs(sharded.masterBytes() - (3000000 + 2000001) * 4 / 2), 16);
  });
  const int64_t unsharded = (3000000 + 2000001) * 4 * 2;  // exp_avg, exp_avg_sq
  for (const int64_t b : bytes) {
    // Half of each bucket (one element more on one rank where a bucket is odd) and the step
    // counts (an int64 scalar per bucket).
    EXPECT_LE(std::llabs(b - unsharded / 2), 64) << b;
  }
}

}  // namespace
}  // namespace ppstage
