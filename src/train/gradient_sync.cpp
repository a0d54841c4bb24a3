// See include/ppstage/train/gradient_sync.h.
#include "ppstage/train/gradient_sync.h"

#include <ATen/ATen.h>

#include <algorithm>

#include "ppstage/comm/communicator.h"
#include "ppstage/core/error.h"
#include "ppstage/core/topology.h"

namespace ppstage {

struct GradientSync::TieGroup {
  std::vector<at::Tensor*> local_copies;  // this rank's copies' tensors
  std::unique_ptr<Communicator> owners;   // the ranks (of this replica) holding a copy
  bool counts_norm = false;               // this rank holds the first copy
};

namespace {

at::Tensor& gradOf(at::Tensor& param) {
  at::Tensor& grad = param.mutable_grad();
  if (!grad.defined()) grad = at::zeros_like(param);
  return grad;
}

}  // namespace

GradientSync::GradientSync(Communicator& world, const Topology& topology,
                           std::vector<StageModule*> stages, const std::vector<TiedParameter>& ties)
    : topology_(topology), stages_(std::move(stages)) {
  if (topology.dpSize() > 1) {
    dp_group_ = world.split(topology.dataParallelColor(), topology.dpRank());
  }
  for (const TiedParameter& tie : ties) {
    TieGroup group;
    for (const TiedParameter::Copy& copy : tie.copies) {
      for (StageModule* stage : stages_) {
        if (stage->index != copy.stage) continue;
        group.local_copies.push_back(&stage->parameters.at(copy.parameter).value);
        if (&copy == &tie.copies.front()) group.counts_norm = true;
      }
    }
    const bool member = !group.local_copies.empty();
    // Owners of this replica share its pipeline's color; every other rank lands in one
    // unused group.
    std::unique_ptr<Communicator> owners =
        world.split(topology.pipelineColor(member), topology.rank());
    if (member && owners->size() > 1) group.owners = std::move(owners);
    ties_.push_back(std::move(group));
  }
}

GradientSync::~GradientSync() = default;

std::vector<at::Tensor> GradientSync::parameters() const {
  std::vector<at::Tensor> params;
  for (StageModule* stage : stages_) {
    for (const StageParameter& p : stage->parameters) {
      if (p.is_parameter && p.value.requires_grad()) params.push_back(p.value);
    }
  }
  return params;
}

void GradientSync::synchronize(bool data_parallel) {
  std::vector<at::Tensor> params = parameters();
  for (at::Tensor& p : params) gradOf(p);
  if (dp_group_) {
    // Without the replicas' sum, still the tied copies': their sum over the copies then
    // adds what the unsharded step adds, in its order.
    const std::vector<bool> tied = tiedParameters();
    std::vector<at::Tensor> grads;
    for (size_t i = 0; i < params.size(); ++i) {
      if (data_parallel || tied[i]) grads.push_back(params[i].mutable_grad());
    }
    if (!grads.empty()) dp_group_->allReduceSum(grads);
  }
  for (TieGroup& tie : ties_) {
    if (tie.local_copies.empty()) continue;
    at::Tensor sum = gradOf(*tie.local_copies.front()).clone();
    for (size_t i = 1; i < tie.local_copies.size(); ++i) sum.add_(gradOf(*tie.local_copies[i]));
    if (tie.owners) tie.owners->allReduceSum({sum});
    for (at::Tensor* copy : tie.local_copies) copy->mutable_grad().copy_(sum);
  }
}

std::vector<bool> GradientSync::tiedParameters() const {
  std::vector<const at::Tensor*> copies;
  for (const TieGroup& tie : ties_)
    copies.insert(copies.end(), tie.local_copies.begin(), tie.local_copies.end());
  std::vector<bool> tied;
  for (StageModule* stage : stages_) {
    for (const StageParameter& p : stage->parameters) {
      if (!p.is_parameter || !p.value.requires_grad()) continue;
      tied.push_back(std::find(copies.begin(), copies.end(), &p.value) != copies.end());
    }
  }
  return tied;
}

std::vector<bool> GradientSync::countsInNorm() const {
  // Tied copies after synchronize() hold the same gradient: count the tensor once.
  std::vector<const at::Tensor*> skip;
  for (const TieGroup& tie : ties_) {
    for (size_t i = 0; i < tie.local_copies.size(); ++i) {
      if (i > 0 || !tie.counts_norm) skip.push_back(tie.local_copies[i]);
    }
  }
  std::vector<bool> counts;
  for (StageModule* stage : stages_) {
    for (const StageParameter& p : stage->parameters) {
      if (!p.is_parameter || !p.value.requires_grad()) continue;
      // A whole tensor is held (and its gradient equal) on every tensor-parallel rank:
      // counted once, on the first; each rank's shard counts on its own.
      counts.push_back(std::find(skip.begin(), skip.end(), &p.value) == skip.end() &&
                       (p.shard.sharded() || topology_.tpRank() == 0));
    }
  }
  return counts;
}

double GradientSync::squaredNormShare() const {
  if (topology_.dpRank() != 0) return 0;
  const std::vector<bool> counts = countsInNorm();
  std::vector<at::Tensor> squares;  // each counted gradient's, where it is: one copy to read
  size_t i = 0;
  for (StageModule* stage : stages_) {
    for (const StageParameter& p : stage->parameters) {
      if (!p.is_parameter || !p.value.requires_grad()) continue;
      const bool counted = counts[i++];
      if (!counted || !p.value.grad().defined()) continue;
      squares.push_back(p.value.grad().to(at::kDouble).pow(2).sum());
    }
  }
  if (squares.empty()) return 0;
  const at::Tensor host = at::stack(squares).cpu();
  const double* square = host.data_ptr<double>();
  double sum = 0;
  for (size_t i = 0; i < squares.size(); ++i) sum += square[i];  // in order, as before
  return sum;
}

std::pair<int, int> GradientSync::firstNonfiniteGradient() const {
  std::vector<std::pair<int, int>> where;  // (stage, parameter) of each gradient checked
  std::vector<at::Tensor> finite;          // whether it is all finite, read in one copy
  for (StageModule* stage : stages_) {
    for (size_t i = 0; i < stage->parameters.size(); ++i) {
      const at::Tensor& grad = stage->parameters[i].value.grad();
      if (!grad.defined()) continue;
      where.emplace_back(stage->index, static_cast<int>(i));
      finite.push_back(at::isfinite(grad).all());
    }
  }
  if (finite.empty()) return {-1, -1};
  const at::Tensor host = at::stack(finite).cpu();
  const bool* ok = host.data_ptr<bool>();
  for (size_t i = 0; i < where.size(); ++i) {
    if (!ok[i]) return where[i];
  }
  return {-1, -1};
}

void GradientSync::scale(double factor) {
  for (at::Tensor& p : parameters()) {
    if (p.grad().defined()) p.mutable_grad().mul_(factor);
  }
}

double clipCoefficient(double norm, double max_norm) {
  if (max_norm <= 0) return 1;
  return std::min(1.0, max_norm / (norm + 1e-6));
}

}  // namespace ppstage
