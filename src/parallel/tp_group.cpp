// See include/ppstage/parallel/tp_group.h.
#include "ppstage/parallel/tp_group.h"

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/util/Exception.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/library.h>

#include <chrono>
#include <map>
#include <mutex>

#include "ppstage/comm/communicator.h"
#include "ppstage/core/error.h"
#include "ppstage/observe/trace.h"
#include "ppstage/split/tensor_shard.h"

namespace ppstage {

namespace {

struct Registry {
  std::mutex mutex;
  std::map<int, TpGroup*> groups;
  int next_id = 1;
};

Registry& registry() {
  static Registry* r = new Registry();  // outlives every group, whatever the exit order
  return *r;
}

at::Tensor summed(const at::Tensor& tensor, int64_t group) {
  at::Tensor sum = tensor.contiguous().clone();
  tpGroupOf(group).allReduceSum(sum);
  return sum;
}

// Forward: the input; backward: the gradient summed over the group.
struct TpCopy : public torch::autograd::Function<TpCopy> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x,
                            int64_t group) {
    ctx->saved_data["group"] = group;
    return x;
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    return {summed(grads.at(0), ctx->saved_data["group"].toInt()), at::Tensor()};
  }
};

// Forward: the input summed over the group; backward: the gradient.
struct TpReduce : public torch::autograd::Function<TpReduce> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x,
                            int64_t group) {
    return summed(x, group);
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    return {grads.at(0), at::Tensor()};
  }
};

at::Tensor tpCopy(const at::Tensor& x, int64_t group) { return TpCopy::apply(x, group); }
at::Tensor tpReduce(const at::Tensor& x, int64_t group) { return TpReduce::apply(x, group); }

// A dropout of a sharded tensor that drops what one process's dropout of the whole tensor
// drops: the keyed mask is drawn for the whole (the shard's shape, `dim` times the group's
// size) and this rank's shard of it taken. Costs the group's size in draws; the mask and so
// the numerics are those of one process. `part`: the whole width of one of dim's parts
// (TensorShard), which unlike their count does not change with the micro-batch's size
// (heads merged with the batch: H per sample).
at::Tensor tpDropout(const at::Tensor& x, double p, bool train, at::Generator generator,
                     int64_t dim, int64_t part, int64_t group) {
  if (!train || p == 0 || x.numel() == 0) return x;
  const TpGroup& g = tpGroupOf(group);
  std::vector<int64_t> whole = x.sizes().vec();
  whole.at(static_cast<size_t>(dim)) *= g.size();
  static const auto keyed =
      c10::Dispatcher::singleton()
          .findSchemaOrThrow("ppstage::dropout", "")
          .typed<at::Tensor(const at::Tensor&, double, bool, at::Generator)>();
  const at::Tensor mask = keyed.call(at::ones(whole, x.options()), p, train, generator);
  const int64_t parts = whole[static_cast<size_t>(dim)] / part;
  const TensorShard shard{static_cast<int>(dim), static_cast<int>(parts), g.rank(), g.size()};
  return x * shardOf(mask, shard);
}

}  // namespace

TpGroup::TpGroup(int rank, int size) : rank_(rank), size_(size) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  id_ = r.next_id++;
  r.groups[id_] = this;
}

TpGroup::~TpGroup() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.groups.erase(id_);
}

void TpGroup::attach(std::unique_ptr<Communicator> comm) {
  PPSTAGE_INTERNAL_ASSERT(comm && comm->size() == size_ && comm->rank() == rank_,
                          "a tensor-parallel group of ", size_, " ranks given another's ",
                          "communicator");
  comm_ = std::move(comm);
}

void TpGroup::allReduceSum(at::Tensor& tensor) {
  PPSTAGE_INTERNAL_ASSERT(comm_ != nullptr, "tensor-parallel group ", id_,
                          " used before its communicator was attached");
  const int64_t start = TraceRecorder::now();
  comm_->allReduceSum({tensor});
  const int64_t end = TraceRecorder::now();
  if (trace_ != nullptr) trace_->add(TraceKind::kTensorParallel, start, end);
  seconds_ += static_cast<double>(end - start) * 1e-9;
  ++calls_;
}

at::Tensor gatherShards(const at::Tensor& piece, const TensorShard& shard, TpGroup& group) {
  if (!shard.sharded()) return piece;
  std::vector<int64_t> sizes = piece.sizes().vec();
  sizes.at(static_cast<size_t>(shard.dim)) = wholeSize(sizes[shard.dim], shard);
  at::Tensor whole = at::zeros(sizes, piece.options().requires_grad(false));
  placeShard(whole, piece.detach(), shard);
  group.allReduceSum(whole);
  return whole;
}

TpGroup& tpGroupOf(int64_t id) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  const auto it = r.groups.find(static_cast<int>(id));
  TORCH_CHECK(it != r.groups.end(), "no tensor-parallel group ", id, " in this process");
  return *it->second;
}

// Registered on first use rather than by a static constructor, which the linker drops from
// static libraries (as graph/keyed_random.cpp's ops are).
void registerTpOps() {
  static const torch::Library* library = [] {
    auto* lib =
        new torch::Library(torch::Library::FRAGMENT, "ppstage", c10::nullopt, __FILE__, __LINE__);
    lib->def("tp_copy(Tensor x, int group) -> Tensor", &tpCopy);
    lib->def("tp_reduce(Tensor x, int group) -> Tensor", &tpReduce);
    lib->def(
        "tp_dropout(Tensor x, float p, bool train, Generator? generator, int dim, int part, "
        "int group) -> Tensor",
        &tpDropout);
    return lib;
  }();
  (void)library;
}

}  // namespace ppstage
