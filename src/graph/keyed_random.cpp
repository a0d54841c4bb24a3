// Keyed random ops: random numbers that do not depend on how a model is cut or run.
//
// Note [Keyed random ops]
// ~~~~~~~~~~~~~~~~~~~~~~~
// A dropout that draws from the global generator gets numbers that depend on everything
// that drew before it in the same process: which stages this rank runs, in which order the
// schedule runs micro-batches, whether a JIT executor reordered or decomposed ops. So does
// any random op. Capture therefore rewrites the graph once, before it is cut, so that every
// random op draws from a generator of its own:
//
//   %g = ppstage::keyed_generator(%random_key, %index)   // seeded from the key below
//   %y = ppstage::dropout(%x, %p, %train, %g)            // was aten::dropout(%x, %p, %train)
//
// The generator's seed mixes (splitmix64) five numbers:
//   - the thread's RandomStream: --train.seed, the step and the global micro-batch index
//     (dp rank x micro-batches + local index), set by the executor around each forward;
//   - %random_key, one int64 tensor per module call with random ops, holding a hash of its
//     module path ("layers.3.attn.drop") and of how many calls of that path with random
//     ops came before it in graph order (a module called twice draws two masks). It is a graph
//     input like a buffer, not a constant, so that identical blocks stay identical graphs and still
//     share one compiled executor;
//   - %index, the op's place among that call's random ops in graph order.
// All five are fixed before the split, so a draw is the same at any pp, stage count, split,
// schedule, compile mode or rank, and at any dp with the same global micro-batch count
// (dp x micro-batches). It changes with that count: micro-batch m holds other samples
// then, and its index keys the draw.
//
// Which ops: an op whose schema takes `Generator? generator` gets %g for its None (bernoulli,
// bernoulli_, normal, uniform_, exponential_, random_, multinomial, ...); an op with an
// overload that takes one is moved to it (rand, randn, randint, randperm); rand_like,
// randn_like and randint_like become empty_like plus uniform_, normal_ or random_; the
// dropout family (dropout, feature_dropout, alpha_dropout, feature_alpha_dropout, their
// in-place forms, native_dropout) becomes ppstage's ops below, which compute what ATen's
// CPU dropout computes, drawing from %g. scaled_dot_product_attention with dropout (what
// nn.MultiheadAttention runs in training since torch 2.0) becomes its three parts, as ATen's
// math kernel computes them: ppstage::attention_probs (softmax(q k^T scale + mask)), the keyed
// ppstage::dropout of those, and a matmul with v. An op whose dropout probability is the
// constant 0 draws nothing and stays. Any other nondeterministic op is refused, and so is an
// RNN's inter-layer dropout, which ATen draws inside one op.
//
// The generator is made right before the top-level node holding the op, so that a random op
// in a loop draws fresh numbers from one generator each iteration. On CPU it is an mt19937
// seeded from the mix (which keeps 32 bits of it); elsewhere a clone of the device's default
// generator with the mix as its seed (keyed ops never draw from the default generator; only
// capture's own probe runs, before the rewrite, do, and nothing ppstage computes reads it).
#include "keyed_random.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <torch/csrc/jit/frontend/error_report.h>
#include <torch/csrc/jit/ir/ir.h>
#include <torch/library.h>

#include <cmath>
#include <limits>
#include <map>
#include <tuple>

#include "ppstage/core/error.h"
#include "ppstage/graph/model_failure.h"
#include "ppstage/graph/random_stream.h"

namespace ppstage {

namespace graph_detail {

namespace {

using torch::jit::Node;
using torch::jit::Value;
namespace aten = c10::aten;

// --- the operators ------------------------------------------------------------------------

uint64_t splitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

uint64_t mixIn(uint64_t hash, uint64_t value) { return splitMix64(hash ^ splitMix64(value)); }

int64_t pathHash(const std::string& path) {  // FNV-1a
  uint64_t hash = 0xcbf29ce484222325ULL;
  for (const char c : path) hash = (hash ^ static_cast<unsigned char>(c)) * 0x100000001b3ULL;
  return static_cast<int64_t>(hash);
}

at::Generator keyedGenerator(const at::Tensor& key, int64_t index) {
  const RandomStream stream = currentRandomStream();
  uint64_t seed = splitMix64(static_cast<uint64_t>(stream.seed));
  for (const int64_t part : {stream.step, stream.microbatch, key.item<int64_t>(), index}) {
    seed = mixIn(seed, static_cast<uint64_t>(part));
  }
  const at::Device device =
      stream.cuda_device >= 0
          ? at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(stream.cuda_device))
          : key.device();
  if (device.is_cpu()) return at::detail::createCPUGenerator(seed ^ (seed >> 32));
  at::Generator generator = at::globalContext().defaultGenerator(device).clone();
  generator.set_current_seed(seed);
  return generator;
}

// (N, C, 1, ..., 1): one draw per sample and channel.
at::Tensor featureNoise(const at::Tensor& input) {
  TORCH_CHECK(input.dim() >= 2, "feature dropout needs at least 2 dimensions, got ", input.dim());
  std::vector<int64_t> shape(input.dim(), 1);
  shape[0] = input.size(0);
  shape[1] = input.size(1);
  return at::empty(shape, input.options());
}

// What ATen's _dropout_impl computes, with the noise drawn from `generator`.
template <bool kFeature, bool kAlpha, bool kInPlace>
at::Tensor keyedDropout(const at::Tensor& input, double p, bool train, at::Generator generator) {
  TORCH_CHECK(p >= 0 && p <= 1, "dropout probability has to be between 0 and 1, but got ", p);
  if (p == 0 || !train || input.numel() == 0) return input;
  if (p == 1) return kInPlace ? input.mul_(0) : input * at::zeros({}, input.options());
  at::Tensor noise = kFeature ? featureNoise(input) : at::empty_like(input);
  noise.bernoulli_(1 - p, generator);
  at::Tensor shift;
  if (kAlpha) {
    constexpr double kAlphaValue = 1.7580993408473766;
    const double a = 1. / std::sqrt((kAlphaValue * kAlphaValue * p + 1) * (1 - p));
    shift = noise.add(-1).mul_(kAlphaValue * a).add_(kAlphaValue * a * p);
    noise.mul_(a);
  } else {
    noise.div_(1 - p);
  }
  at::Tensor output = kInPlace ? input.mul_(noise) : input * noise;
  return kAlpha ? output.add_(shift) : output;
}

std::tuple<at::Tensor, at::Tensor> keyedNativeDropout(const at::Tensor& input, double p,
                                                      c10::optional<bool> train,
                                                      at::Generator generator) {
  if (train.has_value() && !*train) {
    return {input.clone(), at::ones_like(input, input.options().dtype(at::kBool))};
  }
  const double keep = 1. - p;
  at::Tensor mask = at::empty_like(input).bernoulli_(keep, generator);
  const double scale = keep == 0 ? 0. : 1. / keep;
  return {input * mask * scale, mask.to(at::kBool)};
}

// softmax(q k^T scale + mask) over the keys, as ATen's math kernel of
// scaled_dot_product_attention computes it: half and bfloat16 inputs in float32, q and k each
// scaled by sqrt(|scale|) (default scale 1 / sqrt(E); a negative one negates q), a causal or
// boolean mask as -inf, a float mask added, and a row whose keys are all masked all zeros
// (_safe_softmax); returned in the inputs' dtype. (B..., L, E) x (B..., S, E) -> (B..., L, S).
at::Tensor attentionProbs(const at::Tensor& query, const at::Tensor& key,
                          const c10::optional<at::Tensor>& attn_mask, bool is_causal,
                          c10::optional<double> scale) {
  const bool reduced = query.scalar_type() == at::kHalf || query.scalar_type() == at::kBFloat16;
  const at::Tensor q = reduced ? query.to(at::kFloat) : query;
  const at::Tensor k = reduced ? key.to(at::kFloat) : key;
  const double s = scale ? *scale : 1.0 / std::sqrt(static_cast<double>(query.size(-1)));
  const double root = std::sqrt(std::abs(s));
  at::Tensor scores = at::matmul(q * (s < 0 ? -root : root), (k * root).transpose(-2, -1));
  const double minus_inf = -std::numeric_limits<double>::infinity();
  if (is_causal) {
    TORCH_CHECK(!attn_mask.has_value() || !attn_mask->defined(),
                "scaled_dot_product_attention: is_causal and an attn_mask together");
    const at::Tensor keep =
        at::ones({query.size(-2), key.size(-2)}, q.options().dtype(at::kBool)).tril();
    scores = scores.masked_fill(keep.logical_not(), minus_inf);
  }
  if (attn_mask.has_value() && attn_mask->defined()) {
    scores = attn_mask->scalar_type() == at::kBool
                 ? scores.masked_fill(attn_mask->logical_not(), minus_inf)
                 : scores + attn_mask->to(scores.scalar_type());
  }
  return at::_safe_softmax(scores, -1).to(query.scalar_type());
}

// Registered on first use rather than by a static constructor, which the linker drops from
// static libraries. Catch-all kernels: autograd differentiates through the ATen ops inside.
void registerKeyedOps() {
  static const torch::Library* library = [] {
    auto* lib =
        new torch::Library(torch::Library::DEF, "ppstage", c10::nullopt, __FILE__, __LINE__);
    lib->def("keyed_generator(Tensor key, int index) -> Generator?", &keyedGenerator);
    lib->def("dropout(Tensor input, float p, bool train, Generator? generator) -> Tensor",
             &keyedDropout<false, false, false>);
    lib->def("dropout_(Tensor(a!) self, float p, bool train, Generator? generator) -> Tensor(a!)",
             &keyedDropout<false, false, true>);
    lib->def("feature_dropout(Tensor input, float p, bool train, Generator? generator) -> Tensor",
             &keyedDropout<true, false, false>);
    lib->def(
        "feature_dropout_(Tensor(a!) self, float p, bool train, Generator? generator) -> "
        "Tensor(a!)",
        &keyedDropout<true, false, true>);
    lib->def("alpha_dropout(Tensor input, float p, bool train, Generator? generator) -> Tensor",
             &keyedDropout<false, true, false>);
    lib->def(
        "alpha_dropout_(Tensor(a!) self, float p, bool train, Generator? generator) -> "
        "Tensor(a!)",
        &keyedDropout<false, true, true>);
    lib->def(
        "feature_alpha_dropout(Tensor input, float p, bool train, Generator? generator) -> "
        "Tensor",
        &keyedDropout<true, true, false>);
    lib->def(
        "feature_alpha_dropout_(Tensor(a!) self, float p, bool train, Generator? generator) "
        "-> Tensor(a!)",
        &keyedDropout<true, true, true>);
    lib->def(
        "native_dropout(Tensor input, float p, bool? train, Generator? generator) -> "
        "(Tensor, Tensor)",
        &keyedNativeDropout);
    lib->def(
        "attention_probs(Tensor query, Tensor key, Tensor? attn_mask, bool is_causal, "
        "float? scale) -> Tensor",
        &attentionProbs);
    return lib;
  }();
  (void)library;
}

// --- the rewrite --------------------------------------------------------------------------

// aten dropout ops -> ppstage's keyed ones (same arguments plus the generator).
const std::map<c10::Symbol, c10::Symbol>& dropoutOps() {
  static const std::map<c10::Symbol, c10::Symbol> ops = [] {
    std::map<c10::Symbol, c10::Symbol> m;
    for (const char* name :
         {"dropout", "feature_dropout", "alpha_dropout", "feature_alpha_dropout"}) {
      for (const std::string& form : {std::string(name), std::string(name) + "_"}) {
        m[c10::Symbol::aten(form)] = c10::Symbol::fromQualString("ppstage::" + form);
      }
    }
    m[c10::Symbol::aten("native_dropout")] = c10::Symbol::fromQualString("ppstage::native_dropout");
    return m;
  }();
  return ops;
}

bool isGeneratorArgument(const c10::Argument& argument) {
  const c10::TypePtr& type = argument.type();
  if (type->kind() == c10::TypeKind::GeneratorType) return true;
  const auto optional = type->cast<c10::OptionalType>();
  return optional && optional->getElementType()->kind() == c10::TypeKind::GeneratorType;
}

// The schema position of the op's generator argument; -1 when it has none.
int generatorArgument(const Node* node) {
  const c10::FunctionSchema* schema = node->maybeSchema();
  if (schema == nullptr) return -1;
  const auto& args = schema->arguments();
  for (size_t i = 0; i < args.size() && i < node->inputs().size(); ++i) {
    if (isGeneratorArgument(args[i])) return static_cast<int>(i);
  }
  return -1;
}

bool isRandomLike(const Node* node) {
  return node->kind() == aten::rand_like || node->kind() == aten::randn_like ||
         node->kind() == aten::randint_like;
}

// True for an op whose dropout probability argument is the constant 0.0 (an LSTM's
// dropout=0, scaled_dot_product_attention's dropout_p in eval code): it draws nothing.
bool dropsNothing(const Node* node) {
  const c10::FunctionSchema* schema = node->maybeSchema();
  if (schema == nullptr) return false;
  for (const char* name : {"dropout", "dropout_p", "p"}) {
    const auto argument = schema->argumentIndexWithName(name);
    if (!argument) continue;
    const auto value = torch::jit::toIValue(node->input(*argument));
    if (value && value->isDouble() && value->toDouble() == 0.0) return true;
  }
  return false;
}

// True for a node that would draw from the global generator.
bool drawsGlobally(const Node* node) {
  bool draws = false;
  if (dropoutOps().count(node->kind()) > 0 || isRandomLike(node)) {
    draws = true;
  } else if (const int generator = generatorArgument(node); generator >= 0) {
    draws = node->input(generator)->mustBeNone();
  } else {
    draws = node->isNondeterministic();
  }
  return draws && !dropsNothing(node);
}

class RandomOpRewriter {
 public:
  explicit RandomOpRewriter(ModelGraph& model) : model_(model), graph_(*model.graph) {}

  void run() {
    std::vector<Node*> random;
    collect(graph_.block(), random);
    for (Node* node : random) rewrite(node);
  }

 private:
  void collect(torch::jit::Block* block, std::vector<Node*>& random) {
    for (Node* node : block->nodes()) {
      checkRecurrentDropout(node);
      if (drawsGlobally(node)) random.push_back(node);
      for (torch::jit::Block* sub : node->blocks()) collect(sub, random);
    }
  }

  // aten::lstm and friends draw their inter-layer dropout inside one op.
  void checkRecurrentDropout(const Node* node) const {
    const c10::FunctionSchema* schema = node->maybeSchema();
    if (schema == nullptr) return;
    const auto dropout = schema->argumentIndexWithName("dropout");
    const auto train = schema->argumentIndexWithName("train");
    const auto layers = schema->argumentIndexWithName("num_layers");
    if (!dropout || !train || !layers) return;
    const auto p = torch::jit::constant_as<double>(node->input(*dropout));
    const auto training = torch::jit::constant_as<bool>(node->input(*train));
    const auto count = torch::jit::constant_as<int64_t>(node->input(*layers));
    if (p == 0.0 || training == false || count == 1) return;
    PPSTAGE_FAIL("the model's ", node->kind().toQualString(), " at '", where(node),
                 "' applies dropout between its layers inside one ATen op, drawing from the ",
                 "global generator; ppstage cannot key it: use dropout=0, or one-layer ",
                 "recurrent modules with nn.Dropout between them");
  }

  std::string where(const Node* node) const {
    const std::string& path = model_.modulePathOf(node);
    return path.empty() ? "<model>" : path;
  }

  void rewrite(Node* node) {
    Value* generator = generatorFor(node);
    const int argument = generatorArgument(node);
    if (argument >= 0) {
      node->replaceInput(argument, generator);
      return;
    }
    Node* before = node->prev();
    torch::jit::WithInsertPoint guard(node);
    std::vector<Value*> keyed;
    const auto dropout = dropoutOps().find(node->kind());
    if (node->kind() == aten::scaled_dot_product_attention) {
      keyed.push_back(keyedAttention(node, generator));
    } else if (dropout != dropoutOps().end()) {
      std::vector<Value*> inputs(node->inputs().begin(), node->inputs().end());
      inputs.push_back(generator);
      Node* op = graph_.create(dropout->second, inputs, node->outputs().size());
      op->insertBefore(node);
      keyed.assign(op->outputs().begin(), op->outputs().end());
    } else {
      keyed.push_back(isRandomLike(node) ? drawLike(node, generator)
                                         : withGenerator(node, generator));
    }
    tagBetween(before, node, model_.callOf(node));
    replace(node, keyed);
  }

  // An overload of the same op that takes a generator: rand -> rand.generator.
  Value* withGenerator(Node* node, Value* generator) {
    const c10::FunctionSchema& schema = node->schema();
    std::vector<torch::jit::NamedValue> args, kwargs;
    for (size_t i = 0; i < schema.arguments().size(); ++i) {
      const c10::Argument& a = schema.arguments()[i];
      if (a.kwarg_only()) {
        kwargs.emplace_back(a.name(), node->input(i));
      } else {
        args.emplace_back(node->input(i));
      }
    }
    kwargs.emplace_back("generator", generator);
    try {
      return graph_.insert(node->kind(), args, kwargs);
    } catch (const std::exception& e) {
      PPSTAGE_FAIL("the model's ", node->kind().toQualString(), " at '", where(node),
                   "' draws random numbers from the global generator, and ppstage knows no ",
                   "keyed form of it (no overload takes a generator: ", rootCause(errorMessage(e)),
                   ")");
    }
  }

  // scaled_dot_product_attention(q, k, v, mask, p, causal, scale, gqa) ->
  // matmul(ppstage::dropout(ppstage::attention_probs(q, k, mask, causal, scale), p, true, g), v).
  Value* keyedAttention(Node* node, Value* generator) {
    const auto gqa = node->inputs().size() == 8 ? torch::jit::constant_as<bool>(node->input(7))
                                                : c10::optional<bool>(false);
    if (node->inputs().size() < 7 || gqa != false) {
      PPSTAGE_FAIL("the model's aten::scaled_dot_product_attention at '", where(node),
                   "' applies dropout with grouped-query attention (enable_gqa) or a schema "
                   "ppstage does not know; ppstage cannot key its dropout: use dropout_p=0");
    }
    Node* probs = graph_.create(
        c10::Symbol::fromQualString("ppstage::attention_probs"),
        {node->input(0), node->input(1), node->input(3), node->input(5), node->input(6)});
    probs->insertBefore(node)->output()->setType(c10::TensorType::get());
    Node* dropped =
        graph_.create(c10::Symbol::fromQualString("ppstage::dropout"),
                      {probs->output(), node->input(4), graph_.insertConstant(true), generator});
    dropped->insertBefore(node)->output()->setType(c10::TensorType::get());
    return graph_.insert(aten::matmul, {dropped->output(), node->input(2)});
  }

  // rand_like(x, ...) -> empty_like(x, ...).uniform_(0, 1, generator); likewise randn_like
  // (normal_) and randint_like (random_).
  Value* drawLike(Node* node, Value* generator) {
    const c10::FunctionSchema& schema = node->schema();
    std::vector<torch::jit::NamedValue> kwargs;
    for (size_t i = 0; i < schema.arguments().size(); ++i) {
      if (schema.arguments()[i].kwarg_only()) {
        kwargs.emplace_back(schema.arguments()[i].name(), node->input(i));
      }
    }
    Value* empty = graph_.insert(aten::empty_like, {node->input(0)}, kwargs);
    const torch::jit::NamedValue gen("generator", generator);
    if (node->kind() == aten::rand_like) {
      return graph_.insert(aten::uniform_, {empty, 0.0, 1.0}, {gen});
    }
    if (node->kind() == aten::randn_like) {
      return graph_.insert(aten::normal_, {empty, 0.0, 1.0}, {gen});
    }
    const auto low = schema.argumentIndexWithName("low");
    const auto high = schema.argumentIndexWithName("high");
    Value* from = low ? node->input(*low) : graph_.insertConstant(0);
    return graph_.insert(aten::random_, {empty, from, node->input(*high)}, {gen});
  }

  void replace(Node* node, const std::vector<Value*>& outputs) {
    PPSTAGE_INTERNAL_ASSERT(outputs.size() == node->outputs().size(), "keyed form of ",
                            node->kind().toQualString(), " has ", outputs.size(), " outputs");
    for (size_t i = 0; i < outputs.size(); ++i) {
      outputs[i]->setType(node->output(i)->type());
      node->output(i)->replaceAllUsesWith(outputs[i]);
    }
    model_.node_call.erase(node);
    node->destroy();
  }

  // The nodes inserted between `after` and `before` belong to module call `call`.
  void tagBetween(Node* after, Node* before, int call) {
    if (call == ModelGraph::kRootCall) return;
    for (Node* n = after->next(); n != before; n = n->next()) model_.node_call[n] = call;
  }

  // %g for `node`, made right before the top-level node that holds it.
  Value* generatorFor(Node* node) {
    const int call = model_.callOf(node);
    const int64_t index = next_index_[call]++;
    Node* top = topLevelNodeOf(node, graph_.block());
    Node* before = top->prev();
    torch::jit::WithInsertPoint guard(top);
    Value* index_value = graph_.insertConstant(index);
    Node* make = graph_.create(c10::Symbol::fromQualString("ppstage::keyed_generator"),
                               {randomKey(call), index_value});
    make->output()->setType(c10::OptionalType::create(c10::GeneratorType::get()));
    make->insertBefore(top);
    tagBetween(before, top, model_.callOf(top));
    return make->output();
  }

  // The random-key input of module call `call`, added on first use: "<path>#random_key",
  // "<path>#random_key.1" for the next call of the same module (in graph order), ...
  Value* randomKey(int call) {
    const auto known = keys_.find(call);
    if (known != keys_.end()) return known->second;
    const std::string& path = model_.calls[call].path;
    const int64_t repeat = calls_of_path_[path]++;
    const int64_t hash = static_cast<int64_t>(
        mixIn(static_cast<uint64_t>(pathHash(path)), static_cast<uint64_t>(repeat)));
    const std::string name =
        path + "#random_key" + (repeat > 0 ? "." + std::to_string(repeat) : std::string());
    ModelParameter key{name, at::scalar_tensor(hash, at::kLong), /*is_parameter=*/false,
                       /*tie_group=*/-1};
    key.random_key = true;
    model_.parameters.push_back(key);
    Value* input = graph_.addInput("random_key")->setType(c10::TensorType::get());
    keys_.emplace(call, input);
    return input;
  }

  ModelGraph& model_;
  torch::jit::Graph& graph_;
  std::map<int, Value*> keys_;
  std::map<int, int64_t> next_index_;
  std::map<std::string, int64_t> calls_of_path_;  // keyed calls so far, per module path
};

}  // namespace

void keyRandomOps(ModelGraph& model) {
  registerKeyedOps();
  RandomOpRewriter(model).run();
}

}  // namespace graph_detail
}  // namespace ppstage
