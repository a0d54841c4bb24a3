// See include/ppstage/graph/value_shapes.h.
//
// A probe is a copy of the model graph that returns, instead of each top-level tensor, its
// sizes and dtype (or whether it requires grad), so activations are freed as the probe
// goes. Two runs:
//   - the example batch B, without autograd: exact sizes and dtypes for the plan, at the
//     cost of one inference forward;
//   - a small batch b (2, or 3 when B is 2), with autograd: requires_grad as autograd itself
//     decides it (lists, in-place writes, *_like factories all handled), and the sizes at a
//     second batch, from which per-sample growth follows: (size(B) - size(b)) / (B - b).
#include "ppstage/graph/value_shapes.h"

#include <ATen/core/grad_mode.h>
#include <torch/csrc/jit/ir/ir.h>

#include <unordered_set>

#include "ppstage/core/error.h"
#include "ppstage/graph/graph_runner.h"

namespace ppstage {

int64_t TensorMeta::numel() const {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  return n;
}

namespace {

using torch::jit::Node;
using torch::jit::Value;

bool isTensor(const Value* value) { return value->type()->isSubtypeOf(*c10::TensorType::get()); }

bool isIntOrIntList(const Value* value) {
  return value->type()->kind() == c10::TypeKind::IntType ||
         value->type()->isSubtypeOf(*c10::ListType::ofInts());
}

enum class Asks { kDtype, kRequiresGrad };

// Values that hold prim::Uninitialized on some path: what a branch that raises, or that is
// skipped by an early return, yields for a value it never computes (TorchScript's
// `if fast_path: return y`). They are tensors only in type; reading their sizes would fail.
void findMaybeUninitialized(const torch::jit::Block* block,
                            std::unordered_set<const Value*>& maybe) {
  for (const Node* node : block->nodes()) {
    for (const torch::jit::Block* sub : node->blocks()) findMaybeUninitialized(sub, maybe);
    if (node->kind() == c10::prim::Uninitialized) maybe.insert(node->output());
    if (node->kind() != c10::prim::If && node->kind() != c10::prim::Loop) continue;
    // An If's outputs are its blocks' returns; a Loop's skip the continue condition.
    const size_t skip = node->kind() == c10::prim::Loop ? 1 : 0;
    for (const torch::jit::Block* sub : node->blocks()) {
      for (size_t i = 0; i < node->outputs().size(); ++i) {
        if (maybe.count(sub->outputs()[i + skip]) > 0) maybe.insert(node->output(i));
      }
    }
    if (node->kind() != c10::prim::Loop) continue;
    for (size_t i = 0; i < node->outputs().size(); ++i) {
      if (maybe.count(node->input(i + 2)) > 0) maybe.insert(node->output(i));  // never iterated
    }
  }
}

struct Probe {
  std::shared_ptr<torch::jit::Graph> graph = std::make_shared<torch::jit::Graph>();
  // In output order: a tensor adds two outputs (sizes, then dtype or requires_grad), an int
  // or List[int] one (itself).
  std::vector<const Value*> probed;
};

Probe buildProbe(torch::jit::Graph& model, Asks asks) {
  static const c10::Symbol requires_grad = c10::Symbol::fromQualString("prim::requires_grad");
  Probe probe;
  torch::jit::Graph& g = *probe.graph;
  std::unordered_map<Value*, Value*> copy_of;
  std::unordered_set<const Value*> maybe_uninitialized;
  findMaybeUninitialized(model.block(), maybe_uninitialized);
  for (Value* in : model.inputs()) copy_of[in] = g.addInput()->copyMetadata(in);
  for (Node* node : model.nodes()) {
    Node* clone = g.appendNode(g.createClone(node, [&](Value* v) { return copy_of.at(v); }));
    for (size_t i = 0; i < node->outputs().size(); ++i) {
      Value* original = node->output(i);
      Value* value = clone->output(i);
      copy_of[original] = value;
      if (maybe_uninitialized.count(original) > 0) continue;  // no shape to record
      if (isTensor(original)) {
        probe.probed.push_back(original);
        g.registerOutput(g.insert(c10::aten::size, {value}));
        g.registerOutput(
            g.insert(asks == Asks::kDtype ? c10::prim::dtype : requires_grad, {value}));
      } else if (isIntOrIntList(original)) {
        probe.probed.push_back(original);
        g.registerOutput(value);
      }
    }
  }
  return probe;
}

// Runs `probe` on `input` and the parameters; buffers are copies, so a BatchNorm's running
// statistics in the user's module stay as they were.
std::vector<c10::IValue> runProbe(const Probe& probe, const ModelGraph& model,
                                  const std::vector<at::Tensor>& input) {
  std::vector<c10::IValue> inputs(input.begin(), input.end());
  for (const ModelParameter& p : model.parameters) {
    inputs.emplace_back(p.is_parameter ? p.value : p.value.clone());
  }
  return GraphRunner(probe.graph, "value_shapes").run(inputs);
}

TensorMeta inputMeta(const at::Tensor& t) {
  return TensorMeta{t.sizes().vec(), t.scalar_type(), t.requires_grad(), {}, false};
}

// The graph's inputs: the data inputs and the parameters, as they are.
void addInputShapes(const ModelGraph& model, const std::vector<at::Tensor>& input,
                    ValueShapes& shapes) {
  PPSTAGE_INTERNAL_ASSERT(input.size() == model.numInputs(), "the model takes ", model.numInputs(),
                          " inputs, given ", input.size());
  const auto graph_inputs = model.graph->inputs();
  for (size_t i = 0; i < input.size(); ++i) shapes[graph_inputs[i]] = inputMeta(input[i]);
  for (size_t p = 0; p < model.parameters.size(); ++p) {
    shapes[model.parameterInput(p)] = inputMeta(model.parameters[p].value);
  }
}

// Each dimension as a function of the batch, from its sizes at batch `batch` and batch
// `small`; empty when the shape is not affine in the batch.
std::vector<AffineDim> batchDims(const std::vector<int64_t>& at_batch, int64_t batch,
                                 const std::vector<int64_t>& at_small, int64_t small) {
  if (at_batch.size() != at_small.size()) return {};
  std::vector<AffineDim> dims;
  for (size_t d = 0; d < at_batch.size(); ++d) {
    const int64_t delta = at_batch[d] - at_small[d];
    if (delta % (batch - small) != 0) return {};
    const int64_t per = delta / (batch - small);
    if (per < 0 || at_batch[d] - per * batch < 0) return {};
    dims.push_back(AffineDim{per, at_batch[d] - per * batch});
  }
  return dims;
}

using Sizes = std::unordered_map<const Value*, std::vector<int64_t>>;

// The sizes of every value `probe` records (an int's are [], a List[int]'s [n]) and of the
// graph's data inputs, for `input`, without autograd.
Sizes sizesAt(const Probe& probe, const ModelGraph& model, const std::vector<at::Tensor>& input) {
  std::vector<c10::IValue> out;
  {
    at::NoGradGuard no_grad;
    out = runProbe(probe, model, input);
  }
  Sizes sizes;
  size_t next = 0;
  for (const Value* value : probe.probed) {
    if (isTensor(value)) {
      sizes[value] = out[next].toIntVector();
      next += 2;
    } else {
      sizes[value] = out[next].isInt()
                         ? std::vector<int64_t>{}
                         : std::vector<int64_t>{static_cast<int64_t>(out[next].toIntList().size())};
      next += 1;
    }
  }
  for (size_t i = 0; i < input.size(); ++i)
    sizes[model.graph->inputs()[i]] = input[i].sizes().vec();
  return sizes;
}

// The sizes of `value` at batches 2 and 3 of a shorter length, and at batch 2 of a third
// length (to check the first two against): what the per-token growth comes from.
struct ShortProbes {
  int64_t length = 0, check_length = 0;
  Sizes at2, at3, check2;
};

// Makes `meta`'s dims follow the length, from its sizes at the example `batch` and `length`
// (and its dims there), and at `p`'s; leaves them as they are when the shape is not affine
// in the length.
void addLengthGrowth(TensorMeta& meta, const Value* value, int64_t batch, int64_t length,
                     const ShortProbes& p) {
  const auto s2 = p.at2.find(value), s3 = p.at3.find(value), c2 = p.check2.find(value);
  if (meta.dims.size() != meta.sizes.size() || s2 == p.at2.end() || s3 == p.at3.end()) return;
  const int64_t dl = length - p.length;
  std::vector<AffineDim> dims;
  for (size_t d = 0; d < meta.sizes.size(); ++d) {
    if (s2->second.size() != meta.sizes.size() || s3->second.size() != meta.sizes.size()) return;
    const int64_t grow_long = meta.dims[d].per_sample;
    const int64_t fixed_long = meta.dims[d].fixed;
    const int64_t grow_short = s3->second[d] - s2->second[d];
    const int64_t fixed_short = s2->second[d] - 2 * grow_short;
    if ((grow_long - grow_short) % dl != 0 || (fixed_long - fixed_short) % dl != 0) return;
    const int64_t pst = (grow_long - grow_short) / dl, pt = (fixed_long - fixed_short) / dl;
    const AffineDim dim{grow_long - pst * length, fixed_long - pt * length, pt, pst};
    // A third length must fall on the same line.
    if (c2 != p.check2.end()) {
      if (c2->second.size() != meta.sizes.size() || c2->second[d] != dim.at(2, p.check_length)) {
        return;
      }
    }
    dims.push_back(dim);
  }
  meta.dims = std::move(dims);
  meta.follows_length = true;
}

}  // namespace

std::vector<at::Tensor> narrowSequences(const std::vector<at::Tensor>& inputs, int64_t length) {
  std::vector<at::Tensor> out;
  for (const at::Tensor& t : inputs) out.push_back(t.dim() >= 2 ? t.narrow(1, 0, length) : t);
  return out;
}

ValueShapes recordValueShapes(const ModelGraph& model,
                              const std::function<std::vector<at::Tensor>(int64_t)>& make_input,
                              int64_t batch) {
  ValueShapes shapes;
  const std::vector<at::Tensor> input = make_input(batch);
  const auto graph_inputs = model.graph->inputs();
  addInputShapes(model, input, shapes);

  const Probe sizes_probe = buildProbe(*model.graph, Asks::kDtype);
  std::vector<c10::IValue> full;
  {
    at::NoGradGuard no_grad;
    full = runProbe(sizes_probe, model, input);
  }
  const int64_t small = batch == 2 ? 3 : 2;
  const std::vector<at::Tensor> small_input = make_input(small);
  const Probe grad_probe = buildProbe(*model.graph, Asks::kRequiresGrad);
  const std::vector<c10::IValue> few = runProbe(grad_probe, model, small_input);

  size_t next = 0;
  for (const Value* value : sizes_probe.probed) {
    const c10::IValue& out = full[next];
    if (isTensor(value)) {
      const std::vector<int64_t> sizes = out.toIntVector();
      TensorMeta meta{sizes, static_cast<at::ScalarType>(full[next + 1].toInt()),
                      few[next + 1].toBool(),
                      batchDims(sizes, batch, few[next].toIntVector(), small), false};
      shapes[value] = std::move(meta);
      next += 2;
    } else {
      // Crosses a cut as an int64 tensor of shape [] (an int) or [n] (a List[int]).
      const std::vector<int64_t> sizes =
          out.isInt() ? std::vector<int64_t>{}
                      : std::vector<int64_t>{static_cast<int64_t>(out.toIntList().size())};
      std::vector<AffineDim> dims;
      for (const int64_t size : sizes) dims.push_back(AffineDim{0, size});
      shapes[value] = TensorMeta{sizes, at::kLong, false, dims, false};
      next += 1;
    }
  }
  for (size_t i = 0; i < input.size(); ++i) {
    shapes[graph_inputs[i]].dims =
        batchDims(input[i].sizes().vec(), batch, small_input.at(i).sizes().vec(), small);
  }
  return shapes;
}

void recordLengthGrowth(const ModelGraph& model,
                        const std::function<std::vector<at::Tensor>(int64_t)>& make_input,
                        int64_t batch, int64_t short_length, ValueShapes& shapes) {
  const std::vector<at::Tensor> input = make_input(2);
  const int64_t length = input.at(0).dim() >= 2 ? input[0].size(1) : 0;
  if (short_length <= 0 || short_length >= length) return;
  const Probe sizes_probe = buildProbe(*model.graph, Asks::kDtype);
  ShortProbes p;
  p.length = short_length;
  p.at2 = sizesAt(sizes_probe, model, narrowSequences(input, short_length));
  p.at3 = sizesAt(sizes_probe, model, narrowSequences(make_input(3), short_length));
  p.check_length = short_length / 2;
  if (p.check_length >= 1) {
    p.check2 = sizesAt(sizes_probe, model, narrowSequences(input, p.check_length));
  }
  for (auto& [value, meta] : shapes) addLengthGrowth(meta, value, batch, length, p);
}

ValueShapes probeTensorValues(const ModelGraph& model, const std::vector<at::Tensor>& input) {
  const Probe probe = buildProbe(*model.graph, Asks::kDtype);
  std::vector<c10::IValue> outputs;
  {
    at::NoGradGuard no_grad;
    outputs = runProbe(probe, model, input);
  }
  ValueShapes shapes;
  addInputShapes(model, input, shapes);
  size_t next = 0;
  for (const Value* value : probe.probed) {
    if (!isTensor(value)) {
      next += 1;
      continue;
    }
    shapes[value] = TensorMeta{outputs[next].toIntVector(),
                               static_cast<at::ScalarType>(outputs[next + 1].toInt()),
                               false,
                               {},
                               false};
    next += 2;
  }
  return shapes;
}

}  // namespace ppstage
