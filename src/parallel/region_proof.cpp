// See src/parallel/region_proof.h, and Note [Tensor-parallel regions] in tensor_parallel.cpp.
#include "region_proof.h"

#include <torch/csrc/jit/ir/constants.h>
#include <torch/csrc/jit/ir/ir.h>

#include <c10/util/Optional.h>
#include <numeric>

#include "ppstage/core/error.h"
#include "ppstage/core/text.h"

namespace ppstage::tp_detail {

namespace {

using torch::jit::Node;
using torch::jit::Value;
namespace aten = c10::aten;
namespace prim = c10::prim;

bool isTensor(const Value* v) { return v->type()->isSubtypeOf(*c10::TensorType::get()); }

int64_t product(const std::vector<int64_t>& sizes, size_t begin, size_t end) {
  return std::accumulate(sizes.begin() + static_cast<std::ptrdiff_t>(begin),
                         sizes.begin() + static_cast<std::ptrdiff_t>(end), int64_t{1},
                         std::multiplies<int64_t>());
}

// A dim argument as a non-negative index into `rank` dimensions; -1 when not a constant.
int dimArgument(Value* v, size_t rank) {
  const auto d = constantInt(v);
  if (!d) return -1;
  const int64_t dim = *d < 0 ? *d + static_cast<int64_t>(rank) : *d;
  return dim >= 0 && dim < static_cast<int64_t>(rank) ? static_cast<int>(dim) : -1;
}

bool kindIn(const Node* n, std::initializer_list<const char*> names) {
  for (const char* name : names) {
    if (n->kind() == c10::Symbol::fromQualString(name)) return true;
  }
  return false;
}

// Ops that compute each element from the same element of their tensor inputs (broadcast).
bool isElementwise(const Node* n) {
  return kindIn(n, {"aten::relu",     "aten::relu_",      "aten::gelu",        "aten::silu",
                    "aten::sigmoid",  "aten::tanh",       "aten::neg",         "aten::exp",
                    "aten::log",      "aten::sqrt",       "aten::rsqrt",       "aten::abs",
                    "aten::erf",      "aten::contiguous", "aten::clone",       "aten::square",
                    "aten::softplus", "aten::elu",        "aten::leaky_relu",  "aten::reciprocal",
                    "aten::add",      "aten::add_",       "aten::sub",         "aten::sub_",
                    "aten::mul",      "aten::mul_",       "aten::div",         "aten::div_",
                    "aten::pow",      "aten::rsub",       "aten::masked_fill", "aten::masked_fill_",
                    "aten::where",    "aten::maximum",    "aten::minimum",     "aten::to",
                    "aten::type_as",  "aten::tanh_",      "aten::sigmoid_",    "aten::gelu_"});
}

// Ops that read only what a shard shares with the whole tensor: device, dtype, layout, rank.
bool readsMetadataOnly(const Node* n) {
  return kindIn(n, {"prim::device", "prim::dtype", "prim::layout", "aten::dim", "prim::is_cuda",
                    "aten::is_floating_point"});
}

// Where a reshape from `in` to `out` puts `in`'s sharded dimension. In element order, a
// rank's share is runs of `run` elements every `period` (a part's whole width); it is a
// Sharding of out's dimension j when j's rows are whole within a run and j spans whole
// periods: its parts are then j's span over the period (heads merged with the batch, as
// nn.MultiheadAttention's (T, B*H, hd), are B parts of H). The innermost such j; false
// when there is none (the shard would not be rows of any dimension).
bool reshapedSharding(const std::vector<int64_t>& in, const std::vector<int64_t>& out,
                      const Sharding& s, int ranks, Sharding& result) {
  const auto d = static_cast<size_t>(s.dim);
  const int64_t inner = product(in, d + 1, in.size());
  const int64_t period = in[d] / s.parts * inner;
  const int64_t run = period / ranks;
  if (in[d] % (s.parts * ranks) != 0) return false;
  for (int j = static_cast<int>(out.size()) - 1; j >= 0; --j) {
    const int64_t rows = product(out, static_cast<size_t>(j) + 1, out.size());
    const int64_t span = rows * out[static_cast<size_t>(j)];
    if (run % rows == 0 && span % period == 0) {
      result = {j, static_cast<int>(span / period)};
      return true;
    }
    if (rows > run) return false;
  }
  return false;
}

class Prover {
 public:
  Prover(const StageModule& stage, const ModelGraph& model, int rank, int ranks)
      : stage_(stage), model_(model), rank_(rank), ranks_(ranks) {}

  RegionProof run(Value* entry, const std::vector<LinearOp>& seeds,
                  const std::map<Node*, int>& parts_hint) {
    plan_.entry = entry;
    for (const LinearOp& seed : seeds) {
      seeds_.insert(seed.node);
      const auto hint = parts_hint.find(seed.node);
      if (!column(seed, hint == parts_hint.end() ? 1 : hint->second)) return plan_;
    }
    Node* first = seeds.front().node;
    for (auto it = first->iterator(); it != first->owningBlock()->nodes().end(); ++it) {
      Node* n = *it;
      if (seeds_.count(n) || !reads(n)) continue;
      plan_.reached.push_back(n);
      if (!visit(n)) return plan_;
    }
    for (Value* out : first->owningGraph()->outputs()) {
      if (sharded_.count(out) || per_rank_ints_.count(out)) {
        fail(
            "a sharded value leaves the stage (the region is not closed by a row-parallel linear)");
        return plan_;
      }
    }
    if (plan_.row.empty()) fail("no linear closes the region (no row-parallel linear)");
    return plan_;
  }

 private:
  bool fail(const std::string& why) {
    if (plan_.why.empty()) plan_.why = why;
    return false;
  }
  std::string name(const Node* n) const { return n->kind().toQualString(); }

  const TensorMeta* meta(const Value* v) const {
    const auto it = stage_.value_shapes.find(v);
    return it == stage_.value_shapes.end() ? nullptr : &it->second;
  }
  bool requiresGrad(const Value* v) const {
    const TensorMeta* m = meta(v);
    return m == nullptr || m->requires_grad;
  }

  // Whether `n` reads a value the region made sharded or per-rank.
  bool reads(const Node* n) const {
    for (const Value* v : n->inputs()) {
      if (sharded_.count(v) || per_rank_ints_.count(v) || per_rank_lists_.count(v)) return true;
    }
    return false;
  }
  const Sharding* shardingOf(const Value* v) const {
    const auto it = sharded_.find(v);
    return it == sharded_.end() ? nullptr : &it->second;
  }
  // `n`'s first input the region made sharded, or nullptr.
  Value* shardedInput(Node* n) const {
    for (Value* v : n->inputs()) {
      if (sharded_.count(v)) return v;
    }
    return nullptr;
  }

  bool setSharded(Value* v, Sharding s, Node* origin) {
    for (const torch::jit::Use& use : v->uses()) {
      if (use.user->owningBlock() != v->node()->owningBlock()) {
        return fail("a sharded value is read inside control flow (" + name(use.user) + ")");
      }
    }
    sharded_[v] = s;
    origin_[v] = origin;
    return true;
  }

  // A stage parameter read by `user` alone becomes this rank's `shard` of it.
  bool shardParameter(Value* v, int dim, int parts, const Node* user) {
    const size_t first = stage_.inputs.size();
    if (v->node()->kind() != prim::Param || v->offset() < first) {
      return fail(detail::concat("'", v->debugName(), "' is not a parameter of the stage"));
    }
    const StageParameter& p = stage_.parameters.at(v->offset() - first);
    const bool tied = std::any_of(p.model_parameters.begin(), p.model_parameters.end(),
                                  [&](int i) { return model_.parameters.at(i).tie_group >= 0; });
    if (v->uses().size() != 1 || v->uses()[0].user != user || !p.aliases.empty() || tied) {
      return fail("'" + p.name + "' is also read elsewhere (a tied weight stays whole)");
    }
    if (p.value.size(dim) % (parts * ranks_) != 0) {
      return fail(detail::concat(
          "'", p.name, "' has ", p.value.size(dim), " features along dim ", dim, ": not ",
          parts > 1 ? detail::concat(parts, " parts of ") : "", "a multiple of tp ", ranks_));
    }
    Rewrite r{Rewrite::Kind::kShardParameter};
    r.parameter = v->offset() - first;
    r.shard = TensorShard{dim, parts, rank_, ranks_};
    plan_.rewrites.push_back(r);
    return true;
  }

  void rewrite(Rewrite::Kind kind, Node* n, size_t input, int element = 0) {
    Rewrite r{kind};
    r.node = n;
    r.input = input;
    r.element = element;
    plan_.rewrites.push_back(r);
  }

  // A replicated tensor `n` reads next to a sharded one: each rank's share of its gradient
  // is partial, so it enters through tp_copy.
  void copyIfNeeded(Node* n, size_t input) {
    if (isTensor(n->input(input)) && requiresGrad(n->input(input))) {
      rewrite(Rewrite::Kind::kCopyInput, n, input);
    }
  }

  bool column(const LinearOp& op, int parts) {
    plan_.column.push_back(op);
    if (!shardParameter(op.weight, op.out_dim, parts, op.node)) return false;
    if (op.bias != nullptr && !shardParameter(op.bias, 0, parts, op.node)) return false;
    const TensorMeta* out = meta(op.node->output());
    if (out == nullptr || out->sizes.empty())
      return fail("no recorded shape for a linear's output");
    return setSharded(op.node->output(), {static_cast<int>(out->sizes.size()) - 1, parts}, op.node);
  }

  bool visit(Node* n);
  bool visitSizes(Node* n);
  bool visitElementwise(Node* n, Value* x, const Sharding& s);
  bool visitMatmul(Node* n);
  bool visitReshape(Node* n, Value* x, const Sharding& s);
  bool visitSplit(Node* n, Value* x, const Sharding& s);
  bool visitLinear(Node* n, Value* x, const Sharding& s);
  bool visitSizeRead(Node* n, Value* x, const Sharding& s);
  bool visitAlongOtherDim(Node* n, Value* x, const Sharding& s);
  bool visitPermute(Node* n, Value* x, const Sharding& s);
  c10::optional<std::vector<int64_t>> unpackedSizes(const Node* split, int dim) const;

  const StageModule& stage_;
  const ModelGraph& model_;
  int rank_, ranks_;
  RegionProof plan_;
  std::unordered_set<Node*> seeds_;
  std::unordered_map<const Value*, Sharding> sharded_;
  std::unordered_map<const Value*, Node*> origin_;  // the column linear a value comes from
  // Ints that hold the per-rank size of a sharded dim (read from a shard), and int lists
  // with such elements (true at their positions).
  std::unordered_set<const Value*> per_rank_ints_;
  std::unordered_map<const Value*, std::vector<bool>> per_rank_lists_;
};

bool Prover::visit(Node* n) {
  // The sharded tensor input (the first one) and its sharding.
  Value* x = shardedInput(n);
  if (x == nullptr) return visitSizes(n);
  const Sharding s = sharded_.at(x);
  if (!n->blocks().empty()) return fail(name(n) + " with a sharded value in its blocks");
  if (n->kind() == aten::size) return visitSizeRead(n, x, s);
  if (readsMetadataOnly(n)) return true;
  if (isElementwise(n)) return visitElementwise(n, x, s);
  if (kindIn(n, {"aten::transpose", "aten::transpose_", "aten::permute"})) {
    return visitPermute(n, x, s);
  }
  if (n->kind() == aten::slice || n->kind() == aten::cat) return visitAlongOtherDim(n, x, s);
  if (n->kind() == prim::ListConstruct) {  // tensors to cat: all sharded alike
    for (Value* v : n->inputs()) {
      const Sharding* other = shardingOf(v);
      if (other == nullptr || other->dim != s.dim || other->parts != s.parts) {
        return fail("a list of a shard and a whole tensor");
      }
    }
    return setSharded(n->output(), s, origin_[x]);
  }
  if (kindIn(n, {"aten::softmax", "aten::log_softmax"})) {
    const int dim = dimArgument(n->input(1), meta(x) ? meta(x)->sizes.size() : 0);
    if (dim < 0 || dim == s.dim) return fail(name(n) + " over the sharded dim");
    return setSharded(n->output(), s, origin_[x]);
  }
  if (kindIn(n, {"aten::view", "aten::reshape", "aten::flatten"})) return visitReshape(n, x, s);
  if (kindIn(n, {"aten::split", "aten::split_with_sizes", "aten::chunk", "aten::unsafe_split"})) {
    return visitSplit(n, x, s);
  }
  if (n->kind() == prim::ListUnpack) {
    for (Value* out : n->outputs()) {
      if (!setSharded(out, s, origin_[x])) return false;
    }
    return true;
  }
  if (n->kind() == aten::__getitem__ && n->input(0) == x) {
    return setSharded(n->output(), s, origin_[x]);
  }
  LinearOp linear;
  if (kindIn(n, {"aten::matmul", "aten::mm"}) && asLinear(n, stage_, linear) && linear.input == x &&
      meta(x) != nullptr && s.dim == static_cast<int>(meta(x)->sizes.size()) - 1) {
    return visitLinear(n, x, s);  // h @ W_down: row-parallel
  }
  if (kindIn(n, {"aten::matmul", "aten::bmm", "aten::baddbmm", "aten::scaled_dot_product_attention",
                 "ppstage::attention_probs"})) {
    return visitMatmul(n);
  }
  if (kindIn(n, {"aten::linear", "aten::addmm", "aten::mm"})) return visitLinear(n, x, s);
  if (n->kind() == c10::Symbol::fromQualString("ppstage::dropout")) {
    Rewrite r{Rewrite::Kind::kDropout};
    r.node = n;
    r.sharding = s;
    plan_.rewrites.push_back(r);
    return setSharded(n->output(), s, origin_[x]);
  }
  return fail(name(n) + " reads a sharded value (no rule proves it)");
}

// Nodes that read no sharded tensor but per-rank sizes: lists and ints being built.
bool Prover::visitSizes(Node* n) {
  auto listOf = [&](const Value* v) -> const std::vector<bool>* {
    const auto it = per_rank_lists_.find(v);
    return it == per_rank_lists_.end() ? nullptr : &it->second;
  };
  if (n->kind() == prim::ListConstruct) {
    std::vector<bool> positions;
    for (const Value* v : n->inputs()) positions.push_back(per_rank_ints_.count(v) > 0);
    per_rank_lists_[n->output()] = positions;
    return true;
  }
  if (n->kind() == aten::slice && listOf(n->input(0)) != nullptr) {
    const std::vector<bool>& in = *listOf(n->input(0));
    const auto size = static_cast<int64_t>(in.size());
    const auto start = constantInt(n->input(1)).value_or(0);
    const auto end = constantInt(n->input(2)).value_or(size);
    const auto step = constantInt(n->input(3));
    if (!step || *step != 1) return fail("a slice of sizes with a step");
    const int64_t b = std::clamp<int64_t>(start < 0 ? start + size : start, 0, size);
    const int64_t e = std::clamp<int64_t>(end < 0 ? end + size : end, 0, size);
    std::vector<bool> out(in.begin() + b, in.begin() + std::max(b, e));
    if (std::find(out.begin(), out.end(), true) != out.end()) per_rank_lists_[n->output()] = out;
    return true;
  }
  if (n->kind() == aten::add && listOf(n->input(0)) != nullptr && listOf(n->input(1)) == nullptr &&
      n->output()->type()->kind() == c10::TypeKind::ListType) {
    per_rank_lists_[n->output()] = *listOf(n->input(0));  // per-rank positions stay in front
    return true;
  }
  if (n->kind() == prim::ListUnpack && listOf(n->input(0)) != nullptr) {
    const std::vector<bool>& in = *listOf(n->input(0));
    for (size_t i = 0; i < n->outputs().size() && i < in.size(); ++i) {
      if (in[i]) per_rank_ints_.insert(n->output(i));
    }
    return true;
  }
  if (n->kind() == aten::__getitem__ && listOf(n->input(0)) != nullptr) {
    const auto index = constantInt(n->input(1));
    const std::vector<bool>& in = *listOf(n->input(0));
    if (!index) return fail("an element of sizes picked by a computed index");
    const int64_t i = *index < 0 ? *index + static_cast<int64_t>(in.size()) : *index;
    if (i >= 0 && i < static_cast<int64_t>(in.size()) && in[i]) per_rank_ints_.insert(n->output());
    return true;
  }
  return fail(name(n) + " computes with the sharded width (a size read from a shard)");
}

// transpose and permute move the sharded dim.
bool Prover::visitPermute(Node* n, Value* x, const Sharding& s) {
  if (n->kind() != aten::permute) {
    const int rank = static_cast<int>(meta(x) ? meta(x)->sizes.size() : 0);
    const int a = dimArgument(n->input(1), rank), b = dimArgument(n->input(2), rank);
    if (a < 0 || b < 0) return fail("transpose with dims that are not constants");
    const int dim = s.dim == a ? b : s.dim == b ? a : s.dim;
    return setSharded(n->output(), {dim, s.parts}, origin_[x]);
  }
  const auto dims = constantInts(n->input(1));
  if (!dims) return fail("permute with dims that are not constants");
  for (size_t i = 0; i < dims->size(); ++i) {
    const int64_t d = (*dims)[i] < 0 ? (*dims)[i] + static_cast<int64_t>(dims->size()) : (*dims)[i];
    if (d == s.dim) return setSharded(n->output(), {static_cast<int>(i), s.parts}, origin_[x]);
  }
  return fail("permute without the sharded dim");
}

// slice (a rotary embedding's halves) and cat along a dim other than the sharded one: each
// rank slices or joins its own shard alike.
bool Prover::visitAlongOtherDim(Node* n, Value* x, const Sharding& s) {
  const TensorMeta* out = meta(n->output());
  if (out == nullptr) return fail("no recorded shape for " + name(n) + "'s output");
  const int dim = dimArgument(n->input(1), out->sizes.size());
  if (dim < 0 || dim == s.dim) return fail(name(n) + " along the sharded dim");
  return setSharded(n->output(), s, origin_[x]);
}

bool Prover::visitSizeRead(Node* n, Value* x, const Sharding& s) {
  if (n->inputs().size() == 1) {
    std::vector<bool> positions(meta(x) ? meta(x)->sizes.size() : 0, false);
    if (positions.empty()) return fail("no recorded shape for a sharded value");
    positions[s.dim] = true;
    per_rank_lists_[n->output()] = positions;
    return true;
  }
  const int dim = dimArgument(n->input(1), meta(x) ? meta(x)->sizes.size() : 0);
  if (dim < 0) return fail("a size read at a computed dim");
  if (dim == s.dim) per_rank_ints_.insert(n->output());
  return true;
}

bool Prover::visitElementwise(Node* n, Value* x, const Sharding& s) {
  const TensorMeta* out = meta(n->output());
  if (out == nullptr || meta(x) == nullptr) return fail("no recorded shape around " + name(n));
  const int rank = static_cast<int>(out->sizes.size());
  const int out_dim = s.dim + rank - static_cast<int>(meta(x)->sizes.size());
  for (size_t i = 0; i < n->inputs().size(); ++i) {
    Value* v = n->input(i);
    if (v == x || !isTensor(v) || n->kind() == aten::type_as) continue;
    const Sharding* other = shardingOf(v);
    const TensorMeta* m = meta(v);
    if (m == nullptr) return fail("no recorded shape for an operand of " + name(n));
    const int k = out_dim - (rank - static_cast<int>(m->sizes.size()));
    if (other != nullptr) {
      if (other->dim != k || other->parts != s.parts)
        return fail(name(n) + " of two shards that differ");
      continue;
    }
    if (k < 0 || m->sizes[k] == 1) {
      copyIfNeeded(n, i);  // broadcast along the sharded dim: each rank reads all of it
      continue;
    }
    return fail(name(n) + " of a shard and a whole tensor spanning the sharded dim");
  }
  return setSharded(n->output(), {out_dim, s.parts}, origin_[x]);
}

// matmul/bmm over batch dims: a shard along a batch dim (attention's heads) stays one; a
// shard of the rows of the first operand too. Contracting over the sharded dim would need
// the row-parallel sum: not proven here. scaled_dot_product_attention: q, k, v sharded
// along one batch dim; ppstage::attention_probs (its keyed form's softmax(q k^T), see
// graph/keyed_random.cpp): q and k.
bool Prover::visitMatmul(Node* n) {
  const TensorMeta* out = meta(n->output());
  if (out == nullptr) return fail("no recorded shape for " + name(n) + "'s output");
  const int rank = static_cast<int>(out->sizes.size());
  const bool attention = kindIn(n, {"aten::scaled_dot_product_attention"});
  const bool probs = kindIn(n, {"ppstage::attention_probs"});
  // The multiplied operands; baddbmm's input 0 and attention's mask are added.
  const std::vector<size_t> operands = attention                    ? std::vector<size_t>{0, 1, 2}
                                       : n->kind() == aten::baddbmm ? std::vector<size_t>{1, 2}
                                                                    : std::vector<size_t>{0, 1};
  int out_dim = -1, parts = 1;
  Node* origin = nullptr;
  for (size_t pos = 0; pos < operands.size(); ++pos) {  // where each shard goes
    Value* v = n->input(operands[pos]);
    const Sharding* s = shardingOf(v);
    if (s == nullptr) continue;
    const int r = static_cast<int>(meta(v)->sizes.size());
    const bool batch = s->dim < r - 2;
    const bool rows = pos == 0 && !attention && !probs && s->dim == r - 2;
    if (!batch && !rows) return fail(name(n) + " contracting or mixing the sharded dim");
    const int d = rows ? rank - 2 : s->dim + rank - r;
    if (out_dim >= 0 && (d != out_dim || s->parts != parts)) {
      return fail(name(n) + " of operands sharded differently");
    }
    out_dim = d;
    parts = s->parts;
    origin = origin_[v];
  }
  if (out_dim < 0) return fail(name(n) + " adding a shard to a product of whole operands");
  for (size_t i = 0; i < n->inputs().size(); ++i) {  // whole tensors must broadcast
    Value* v = n->input(i);
    const bool operand = std::find(operands.begin(), operands.end(), i) != operands.end();
    if (const Sharding* added = operand ? nullptr : shardingOf(v)) {  // a sharded mask
      const int r = static_cast<int>(meta(v)->sizes.size());
      if (added->dim != out_dim + r - rank || added->parts != parts) {
        return fail(name(n) + " adding a shard that does not line up with the product's");
      }
      continue;
    }
    if (!isTensor(v) || shardingOf(v) != nullptr) continue;
    if (operand && out_dim == rank - 2) {  // a whole matrix times a shard of rows
      copyIfNeeded(n, i);
      continue;
    }
    const TensorMeta* m = meta(v);
    if (m == nullptr) return fail("no recorded shape for an operand of " + name(n));
    const int r = static_cast<int>(m->sizes.size());
    const int k = out_dim + r - rank;
    if (k >= 0 && k < r && m->sizes[static_cast<size_t>(k)] != 1) {
      return fail(name(n) + " of a shard and a whole operand spanning the sharded dim");
    }
    copyIfNeeded(n, i);
  }
  if (attention) {
    const auto p = constantNumber(n->input(4));
    if (!p || *p != 0) return fail("scaled_dot_product_attention with dropout inside");
  }
  return setSharded(n->output(), {out_dim, parts}, origin);
}

// view, reshape, flatten: the shard moves to the dimension spanning the same elements; the
// size the region asks for there becomes its per-rank value (a size read from a shard
// already is one).
bool Prover::visitReshape(Node* n, Value* x, const Sharding& s) {
  const TensorMeta* in = meta(x);
  const TensorMeta* out = meta(n->output());
  if (in == nullptr || out == nullptr) return fail("no recorded shape around " + name(n));
  Sharding result;
  if (!reshapedSharding(in->sizes, out->sizes, s, ranks_, result)) {
    return fail(detail::concat(name(n), " of ", shapeText(in->sizes), " (dim ", s.dim,
                               " sharded) into ", shapeText(out->sizes),
                               " leaves no dimension holding whole shards (heads that do not ",
                               "divide by tp ", ranks_, "?)"));
  }
  if (n->kind() != aten::flatten) {
    const auto it = per_rank_lists_.find(n->input(1));
    const bool has_per_rank = it != per_rank_lists_.end();
    for (size_t i = 0; has_per_rank && i < it->second.size(); ++i) {
      if (it->second[i] && static_cast<int>(i) != result.dim) {
        return fail(name(n) + " sized by a shard's width in another place");
      }
    }
    if (!has_per_rank || !it->second.at(static_cast<size_t>(result.dim))) {
      rewrite(Rewrite::Kind::kDivideElement, n, 1, result.dim);
    }
  }
  return setSharded(n->output(), result, origin_[x]);
}

// The recorded sizes along `dim` of what `split` (a split_with_sizes) gives, where a
// ListUnpack takes its pieces; nothing otherwise.
c10::optional<std::vector<int64_t>> Prover::unpackedSizes(const Node* split, int dim) const {
  const auto& uses = split->output()->uses();
  if (uses.size() != 1 || uses[0].user->kind() != prim::ListUnpack) return c10::nullopt;
  std::vector<int64_t> sizes;
  for (const Value* piece : uses[0].user->outputs()) {
    const TensorMeta* m = meta(piece);
    if (m == nullptr || m->sizes.size() <= static_cast<size_t>(dim)) return c10::nullopt;
    sizes.push_back(m->sizes[static_cast<size_t>(dim)]);
  }
  return sizes;
}

// split, split_with_sizes, chunk along the sharded dim cut it into its parts (a fused
// q/k/v), each a shard of its own; along another dim each piece keeps the shard.
bool Prover::visitSplit(Node* n, Value* x, const Sharding& s) {
  const TensorMeta* in = meta(x);
  if (in == nullptr) return fail("no recorded shape for a sharded value");
  const int dim = dimArgument(n->input(2), in->sizes.size());
  if (dim < 0) return fail(name(n) + " along a computed dim");
  if (dim != s.dim) return setSharded(n->output(), s, origin_[x]);
  const int64_t whole = in->sizes[dim];
  int64_t pieces = 0;
  if (n->kind() == aten::chunk) {
    pieces = constantInt(n->input(1)).value_or(0);
  } else if (n->input(1)->type()->kind() == c10::TypeKind::IntType) {
    if (per_rank_ints_.count(n->input(1))) return fail(name(n) + " by a shard's width");
    const auto size = constantInt(n->input(1));
    if (size) {
      pieces = whole / *size;
    } else {  // a computed size (C from x.size(2)): the pieces are what is unpacked
      const bool unpacked = n->output()->uses().size() == 1 &&
                            n->output()->uses()[0].user->kind() == prim::ListUnpack;
      if (!unpacked) return fail(name(n) + " by a computed size, not unpacked");
      pieces = static_cast<int64_t>(n->output()->uses()[0].user->outputs().size());
    }
    rewrite(Rewrite::Kind::kDivideSize, n, 1);
  } else {
    auto sizes = constantInts(n->input(1));
    if (!sizes && n->input(1)->node()->kind() == prim::ListConstruct) {
      sizes = unpackedSizes(n, dim);  // computed sizes ([d, d, d] from x.shape)
    }
    if (!sizes) return fail(name(n) + " by computed sizes, not unpacked");
    for (int64_t size : *sizes) {
      if (size != sizes->front()) return fail(name(n) + " into unequal pieces");
    }
    pieces = static_cast<int64_t>(sizes->size());
    rewrite(Rewrite::Kind::kDivideElements, n, 1);
  }
  if (pieces == s.parts) return setSharded(n->output(), {dim, 1}, origin_[x]);
  if (s.parts == 1 && pieces > 1) {
    plan_.needs_parts_of = origin_[x];
    plan_.needs_parts = static_cast<int>(pieces);
    return fail(detail::concat("a projection cut into ", pieces, " parts"));
  }
  return fail(
      detail::concat(name(n), " into ", pieces, " pieces of a value of ", s.parts, " parts"));
}

// A linear reading a shard of its input features is row-parallel: its weight's input
// features are sharded alike, each rank's product is a partial sum, and tp_reduce sums it
// before the bias is added. That closes the region.
bool Prover::visitLinear(Node* n, Value* x, const Sharding& s) {
  LinearOp op;
  const TensorMeta* in = meta(x);
  if (!asLinear(n, stage_, op) || op.input != x) {
    return fail(name(n) + " of a shard without a parameter weight");
  }
  if (in == nullptr || s.dim != static_cast<int>(in->sizes.size()) - 1) {
    return fail(name(n) + " of a value sharded along a dim other than its features");
  }
  if (!shardParameter(op.weight, op.in_dim, s.parts, n)) return false;
  plan_.row.push_back(op);
  rewrite(Rewrite::Kind::kRowProduct, n, 0);
  return true;
}

}  // namespace

RegionProof proveRegion(const StageModule& stage, const ModelGraph& model, Value* entry,
                        const std::vector<LinearOp>& seeds, const std::map<Node*, int>& parts_hint,
                        int rank, int ranks) {
  PPSTAGE_INTERNAL_ASSERT(!seeds.empty(), "a tensor-parallel region without linears");
  return Prover(stage, model, rank, ranks).run(entry, seeds, parts_hint);
}

}  // namespace ppstage::tp_detail
