// See include/ppstage/parallel/tensor_parallel.h.
//
// Note [Tensor-parallel regions]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// The pass looks at each linear of a stage graph (linear, addmm, matmul or mm with a stage
// parameter as its weight) whose input is replicated, and takes every such linear reading
// the same value as the region's column linears: q, k and v, a fused qkv, an MLP's up (and
// gate). Their weights' output features are sharded, so their outputs are shards of their
// last dim; region_proof.cpp then follows those shards through the graph in order, op by op,
// with a rule per op that says where the shard is in the op's output, or why it cannot be
// proven: elementwise ops (a whole operand must broadcast along the shard), transpose,
// permute, view / reshape / flatten (the shard must stay contiguous; the size the graph asks
// for there is divided by tp, unless it was read from a shard), split / chunk along the
// shard (a fused projection: its weight is then sharded part by part, and proven again),
// softmax over another dim, matmul over batch dims (attention's heads), keyed dropout (which
// then draws the whole mask and keeps its shard, so the numbers are one process's). A
// linear reading a shard of its input features is row-parallel: it closes the region with
// a tp_reduce, its bias added after the sum. A shard that reaches anything else, leaves the
// stage, or enters control flow leaves the whole region replicated, with the reason.
//
// Replicated values stay equal on every rank of the group: the region's entry goes through
// tp_copy (its gradient summed over the group, as the column linears' shares of it are
// partial), and so does any replicated tensor a region reads next to a shard (broadcast
// along it) that needs a gradient. What is outside regions is computed whole everywhere, so
// its parameters' gradients are equal on every rank without a sum.
#include "ppstage/parallel/tensor_parallel.h"

#include <torch/csrc/jit/ir/constants.h>
#include <torch/csrc/jit/ir/ir.h>

#include <algorithm>
#include <unordered_set>

#include "ppstage/core/error.h"
#include "ppstage/parallel/tp_group.h"
#include "region_proof.h"

namespace ppstage {

namespace {

using torch::jit::Node;
using torch::jit::Value;
using tp_detail::LinearOp;
using tp_detail::RegionProof;
using tp_detail::Rewrite;
namespace aten = c10::aten;

constexpr int kMaxProofs = 4;  // a region proven again as its fused projections show parts

// The linears reading `entry` that can become column-parallel, in graph order.
std::vector<LinearOp> columnLinears(Value* entry, const StageModule& stage,
                                    const std::unordered_set<Node*>& done) {
  std::vector<LinearOp> seeds;
  for (const torch::jit::Use& use : entry->uses()) {
    LinearOp op;
    if (done.count(use.user) || !tp_detail::asLinear(use.user, stage, op) || op.input != entry) {
      continue;
    }
    if (use.user->owningBlock() != entry->owningGraph()->block()) continue;
    seeds.push_back(op);
  }
  std::sort(seeds.begin(), seeds.end(),
            [](const LinearOp& a, const LinearOp& b) { return a.node->isBefore(b.node); });
  return seeds;
}

// A region that failed stopped where its proof did: the linears its tensors flow into
// inside the module holding its column linears (an attention's output projection) are
// marked `done` too, so that they are not taken for the start of a region of their own. The
// walk stays inside that module (`scope`, "layers.3.attn"): nothing outside is marked.
void markClosingLinears(const std::vector<LinearOp>& seeds, const std::string& scope,
                        const StageModule& stage, const ModelGraph& model,
                        std::unordered_set<Node*>& done) {
  if (scope.empty()) return;
  auto inside = [&](const Node* n) {
    const auto call = stage.node_call.find(n);
    if (call == stage.node_call.end()) return false;
    const std::string& path = model.calls.at(call->second).path;
    return path == scope || path.rfind(scope + ".", 0) == 0;
  };
  std::vector<Value*> pending;
  for (const LinearOp& seed : seeds) pending.push_back(seed.node->output());
  std::unordered_set<Node*> seen;
  while (!pending.empty()) {
    Value* v = pending.back();
    pending.pop_back();
    for (const torch::jit::Use& use : v->uses()) {
      Node* user = use.user;
      LinearOp op;
      if (!seen.insert(user).second || !inside(user)) continue;
      if (tp_detail::asLinear(user, stage, op)) {
        done.insert(user);
        continue;
      }
      for (Value* out : user->outputs()) {  // tensors only: sizes reach unrelated values
        const auto kind = out->type()->kind();
        if (kind == c10::TypeKind::TensorType || kind == c10::TypeKind::ListType) {
          pending.push_back(out);
        }
      }
    }
  }
}

// The module path shared by every linear of `plan`: "layers.3.attn".
std::string regionModule(const RegionProof& plan, const StageModule& stage,
                         const ModelGraph& model) {
  std::vector<std::string> paths;
  for (const auto* linears : {&plan.column, &plan.row}) {
    for (const LinearOp& op : *linears) {
      const auto it = stage.node_call.find(op.node);
      paths.push_back(it == stage.node_call.end() ? "" : model.calls.at(it->second).path);
    }
  }
  std::string common = paths.front();
  for (const std::string& path : paths) {
    size_t n = 0;
    while (n < common.size() && n < path.size() && common[n] == path[n]) ++n;
    common.resize(n);
  }
  if (std::find(paths.begin(), paths.end(), common) == paths.end()) {
    const size_t dot = common.rfind('.');
    common.resize(dot == std::string::npos ? 0 : dot);  // "layers.3.attn.q" -> "layers.3.attn"
  }
  return common;
}

// The module a failed region's column linears sit in: their common path, less the linear's
// own name when it is one of them ("layers.3.attn.qkv" -> "layers.3.attn").
std::string scopeOf(const std::string& module, const std::vector<LinearOp>& seeds,
                    const StageModule& stage, const ModelGraph& model) {
  for (const LinearOp& seed : seeds) {
    const auto call = stage.node_call.find(seed.node);
    if (call != stage.node_call.end() && model.calls.at(call->second).path == module) {
      const size_t dot = module.rfind('.');
      return dot == std::string::npos ? std::string() : module.substr(0, dot);
    }
  }
  return module;
}

std::string parameterPath(const StageModule& stage, const Value* weight) {
  return stage.parameters.at(weight->offset() - stage.inputs.size()).name;
}

// Applies a proven plan to the stage: graph rewrites, then parameter shards.
class RegionRewriter {
 public:
  RegionRewriter(StageModule& stage, const TpGroup& group) : stage_(stage), group_(group) {}

  // Returns the all-reduces it added per micro-batch: forward, backward.
  std::pair<int64_t, int64_t> apply(const RegionProof& plan) {
    int64_t forward = 0, backward = 0;
    backward += enter(plan) ? 1 : 0;
    for (const Rewrite& r : plan.rewrites) {  // first what keeps nodes in place
      switch (r.kind) {
        case Rewrite::Kind::kDivideSize:
          r.node->replaceInput(r.input, divided(r.node, r.node->input(r.input)));
          break;
        case Rewrite::Kind::kDivideElement:
        case Rewrite::Kind::kDivideElements: divideList(r); break;
        case Rewrite::Kind::kCopyInput:
          r.node->replaceInput(r.input, copied(r.node, r.node->input(r.input)));
          ++backward;
          break;
        case Rewrite::Kind::kShardParameter: shardParameter(r); break;
        default: break;
      }
    }
    for (const Rewrite& r : plan.rewrites) {  // then what replaces nodes
      if (r.kind == Rewrite::Kind::kDropout) replaceDropout(r);
      if (r.kind == Rewrite::Kind::kRowProduct) {
        reduceRowProduct(r.node);
        ++forward;
      }
    }
    return {forward, backward};
  }

 private:
  torch::jit::Graph& graph() { return *stage_.graph; }
  c10::IValue groupId() const { return static_cast<int64_t>(group_.id()); }

  // Inserts `kind(args)` before `at`, in its module call.
  Value* insertBefore(Node* at, c10::Symbol kind, const std::vector<torch::jit::NamedValue>& args) {
    torch::jit::WithInsertPoint guard(at);
    Value* v = graph().insert(kind, args);
    const auto call = stage_.node_call.find(at);
    if (call != stage_.node_call.end()) stage_.node_call[v->node()] = call->second;
    return v;
  }

  Value* copied(Node* at, Value* v) {
    return insertBefore(at, c10::Symbol::fromQualString("ppstage::tp_copy"), {v, groupId()});
  }

  // The column linears read the region's entry through one tp_copy, when it needs a gradient.
  bool enter(const RegionProof& plan) {
    const auto meta = stage_.value_shapes.find(plan.entry);
    if (meta != stage_.value_shapes.end() && !meta->second.requires_grad) return false;
    Value* copy = copied(plan.column.front().node, plan.entry);
    for (const LinearOp& op : plan.column) op.node->replaceInputWith(plan.entry, copy);
    return true;
  }

  // An int divided by tp: folded when a constant (-1 stays -1: floor division).
  Value* divided(Node* at, Value* v) {
    const auto constant = tp_detail::constantInt(v);
    const int64_t tp = group_.size();
    if (constant) {
      const int64_t q = *constant >= 0 ? *constant / tp : -((-*constant + tp - 1) / tp);
      torch::jit::WithInsertPoint guard(at);
      return graph().insertConstant(q);
    }
    return insertBefore(at, aten::floordiv, {v, c10::IValue(tp)});
  }

  void divideList(const Rewrite& r) {
    Value* list = r.node->input(r.input);
    const bool all = r.kind == Rewrite::Kind::kDivideElements;
    std::vector<Value*> elements;
    if (list->node()->kind() == c10::prim::ListConstruct) {
      elements.assign(list->node()->inputs().begin(), list->node()->inputs().end());
    } else if (const auto constant = tp_detail::constantInts(list)) {
      torch::jit::WithInsertPoint guard(r.node);
      for (const int64_t e : *constant) elements.push_back(graph().insertConstant(e));
    } else {
      const auto out = stage_.value_shapes.find(r.node->output());
      PPSTAGE_INTERNAL_ASSERT(out != stage_.value_shapes.end(),
                              "a computed size list of unknown length");
      for (size_t i = 0; i < out->second.sizes.size(); ++i) {
        elements.push_back(
            insertBefore(r.node, aten::__getitem__, {list, c10::IValue(static_cast<int64_t>(i))}));
      }
    }
    for (size_t i = 0; i < elements.size(); ++i) {
      if (all || static_cast<int>(i) == r.element) elements[i] = divided(r.node, elements[i]);
    }
    torch::jit::WithInsertPoint guard(r.node);
    Node* rebuilt = graph().insertNode(graph().createList(c10::IntType::get(), elements));
    const auto call = stage_.node_call.find(r.node);  // in the block: one graph per block
    if (call != stage_.node_call.end()) stage_.node_call[rebuilt] = call->second;
    r.node->replaceInput(r.input, rebuilt->output());
  }

  void shardParameter(const Rewrite& r) {
    StageParameter& p = stage_.parameters.at(r.parameter);
    const bool grad = p.value.requires_grad();
    p.value = shardOf(p.value.detach(), r.shard).clone();
    p.value.set_requires_grad(grad);
    p.shard = r.shard;
  }

  // ppstage::dropout(x, p, train, g) -> ppstage::tp_dropout(x, p, train, g, dim, part, group)
  void replaceDropout(const Rewrite& r) {
    Node* n = r.node;
    const auto meta = stage_.value_shapes.find(n->input(0));
    PPSTAGE_INTERNAL_ASSERT(meta != stage_.value_shapes.end(),
                            "a sharded dropout input without a shape");
    const int64_t part =
        meta->second.sizes.at(static_cast<size_t>(r.sharding.dim)) / r.sharding.parts;
    Value* y = insertBefore(
        n, c10::Symbol::fromQualString("ppstage::tp_dropout"),
        {n->input(0), n->input(1), n->input(2), n->input(3),
         c10::IValue(static_cast<int64_t>(r.sharding.dim)), c10::IValue(part), groupId()});
    n->output()->replaceAllUsesWith(y);
    stage_.node_call.erase(n);
    n->destroy();
  }

  // linear(x, W, b) -> tp_reduce(linear(x, W)) + b; addmm(b, x, W) -> tp_reduce(mm(x, W)) + b.
  void reduceRowProduct(Node* n) {
    LinearOp op;
    PPSTAGE_INTERNAL_ASSERT(tp_detail::asLinear(n, stage_, op), "a row product that is no linear");
    const c10::IValue none;
    Value* partial = n->kind() == aten::linear
                         ? insertBefore(n, aten::linear, {op.input, op.weight, none})
                     : n->kind() == aten::addmm ? insertBefore(n, aten::mm, {op.input, op.weight})
                                                : insertBefore(n, n->kind(), {op.input, op.weight});
    Value* sum =
        insertBefore(n, c10::Symbol::fromQualString("ppstage::tp_reduce"), {partial, groupId()});
    Value* out = op.bias == nullptr ? sum : insertBefore(n, aten::add, {sum, op.bias});
    const auto meta = stage_.value_shapes.find(n->output());
    if (meta != stage_.value_shapes.end()) stage_.value_shapes[out] = meta->second;
    n->output()->replaceAllUsesWith(out);
    stage_.node_call.erase(n);
    n->destroy();
  }

  StageModule& stage_;
  const TpGroup& group_;
};

// Proves the region of the column linears reading `entry`, again with parts where a fused
// projection shows them.
RegionProof proveWithParts(const StageModule& stage, const ModelGraph& model, Value* entry,
                           const std::vector<LinearOp>& seeds, const TpGroup& group) {
  std::map<Node*, int> parts;
  RegionProof plan;
  for (int attempt = 0; attempt < kMaxProofs; ++attempt) {
    plan = tp_detail::proveRegion(stage, model, entry, seeds, parts, group.rank(), group.size());
    if (plan.why.empty() || plan.needs_parts_of == nullptr || parts.count(plan.needs_parts_of))
      break;
    parts[plan.needs_parts_of] = plan.needs_parts;
  }
  return plan;
}

}  // namespace

TpStageReport shardStage(StageModule& stage, const ModelGraph& model, const TpGroup& group) {
  TpStageReport report;
  report.stage = stage.index;
  if (group.size() > 1) {
    registerTpOps();
    std::unordered_set<Node*> done;
    const std::vector<Node*> nodes(stage.graph->nodes().begin(), stage.graph->nodes().end());
    for (Node* n : nodes) {
      LinearOp op;
      if (done.count(n) || !tp_detail::asLinear(n, stage, op)) continue;
      const std::vector<LinearOp> seeds = columnLinears(op.input, stage, done);
      if (seeds.empty()) continue;
      const RegionProof plan = proveWithParts(stage, model, op.input, seeds, group);
      for (const LinearOp& seed : seeds) done.insert(seed.node);
      done.insert(plan.reached.begin(), plan.reached.end());
      TpRegion region{regionModule(plan, stage, model), plan.why.empty(), plan.why, {}, {}};
      if (!region.sharded) {  // named by the module holding it: "layers.3.attn", not ".qkv"
        const std::string scope = scopeOf(region.module, seeds, stage, model);
        markClosingLinears(seeds, scope, stage, model, done);
        if (!scope.empty()) region.module = scope;
      }
      for (const LinearOp& c : plan.column) region.column.push_back(parameterPath(stage, c.weight));
      for (const LinearOp& r : plan.row) region.row.push_back(parameterPath(stage, r.weight));
      if (region.sharded) {
        const auto [forward, backward] = RegionRewriter(stage, group).apply(plan);
        report.forward_all_reduces += forward;
        report.backward_all_reduces += backward;
      }
      report.regions.push_back(region);
    }
  }
  for (const StageParameter& p : stage.parameters) {
    if (!p.is_parameter || !p.value.requires_grad()) continue;
    (p.shard.sharded() ? report.sharded_elements : report.replicated_elements) +=
        p.shard.sharded() ? p.value.numel() * p.shard.ranks : p.value.numel();
  }
  stage.value_shapes.clear();
  return report;
}

std::string summarizeRegions(const TpStageReport& report) {
  const auto sharded = std::count_if(report.regions.begin(), report.regions.end(),
                                     [](const TpRegion& r) { return r.sharded; });
  return detail::concat(
      sharded, " of ", report.regions.size(), " regions sharded, ", report.sharded_elements, " of ",
      report.sharded_elements + report.replicated_elements, " parameters sharded; ",
      report.forward_all_reduces, " all-reduces forward, ", report.backward_all_reduces,
      " backward per micro-batch");
}

std::vector<std::string> describeRegions(const TpStageReport& report) {
  std::vector<std::string> lines;
  for (const TpRegion& region : report.regions) {
    std::string line = (region.module.empty() ? std::string("(stage)") : region.module) +
                       (region.sharded ? " sharded" : " replicated");
    if (region.sharded) {
      std::string column, row;
      for (const std::string& c : region.column) column += (column.empty() ? "" : ", ") + c;
      for (const std::string& r : region.row) row += (row.empty() ? "" : ", ") + r;
      line += " (column " + column + "; row " + row + ")";
    } else {
      line += ": " + region.why;
    }
    lines.push_back(line);
  }
  return lines;
}

}  // namespace ppstage
