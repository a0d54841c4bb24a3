// Declares every `section.key` option of ppstage and parses command line and INI files
// (validation.cpp checks the values).
#include "ppstage/config/options.h"

#include <boost/program_options.hpp>
#include <map>
#include <optional>
#include <ostream>
#include <regex>
#include <set>
#include <sstream>

#include "ppstage/core/error.h"
#include "ppstage/core/file.h"
#include "ppstage/core/text.h"

namespace ppstage {
namespace {

// "8,128,64" -> {8, 128, 64}
std::vector<int64_t> parseShape(const std::string& option, const std::string& text) {
  std::vector<int64_t> shape;
  for (const std::string& item : splitList(text)) {
    size_t used = 0;
    long long dim = -1;
    try {
      dim = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    PPSTAGE_CHECK(used == item.size() && dim > 0, "--", option, " must be a comma-separated ",
                  "list of positive sizes such as 8,128; got '", text, "'");
    shape.push_back(dim);
  }
  return shape;
}

// Every option any ppstage command declares: what a config file may contain.
std::set<std::string> knownConfigOptions() {
  Config dummy;
  po::options_description all;
  addAllOptions(all, dummy);
  std::set<std::string> names;
  for (const auto& option : all.options()) names.insert(option->long_name());
  return names;
}

// "; did you mean --train.steps?" for a misspelt option name ("train.step"), among every
// option a command knows and `options` (this command's own); "" when none is near.
std::string didYouMean(const std::string& typed, const po::options_description& options) {
  std::set<std::string> names = knownConfigOptions();
  for (const auto& option : options.options()) names.insert(option->long_name());
  std::string name = typed;
  name.erase(0, name.find_first_not_of('-'));
  const std::string closest = closestName(name, {names.begin(), names.end()});
  return closest.empty() ? "" : "; did you mean --" + closest + "?";
}

// The options other commands declare and `own` does not (`--output.log_every` given to
// `plan`): the command line takes them as a config file does, bound to `ignored`, and leaves
// them to the commands that read them.
po::options_description otherCommandsOptions(const po::options_description& own, Config& ignored) {
  po::options_description all;
  addAllOptions(all, ignored);
  po::options_description others;
  for (const auto& option : all.options()) {
    if (own.find_nothrow(option->long_name(), /*approx=*/false) == nullptr) others.add(option);
  }
  return others;
}

// Of an option given more than once (a script appending `--train.steps 2` to its line), the
// last is taken, as argparse does.
void keepLastOccurrences(po::parsed_options& parsed) {
  std::set<std::string> seen;
  std::vector<po::option> kept;
  for (auto it = parsed.options.rbegin(); it != parsed.options.rend(); ++it) {
    if (!it->string_key.empty() && !seen.insert(it->string_key).second) continue;
    kept.push_back(*it);
  }
  parsed.options.assign(kept.rbegin(), kept.rend());
}

// Each option's text in `parsed` (its tokens joined by spaces; a switch's "true"), unless
// `texts` has it already: the command line is recorded before the file.
void recordTexts(const po::parsed_options& parsed, std::map<std::string, std::string>& texts) {
  for (const po::option& option : parsed.options) {
    if (option.string_key.empty()) continue;
    std::string text;
    for (const std::string& token : option.value) text += (text.empty() ? "" : " ") + token;
    texts.emplace(option.string_key, option.value.empty() ? "true" : text);
  }
}

// Boost.Program_options writes its error messages by replacing placeholders (%value%,
// %option%, ...) until none is left, so an option or a value that holds one makes what()
// loop forever (found by tests/fuzz/config_fuzzer). Such text is refused before Boost
// sees it; no real option or value holds one.
void refusePlaceholders(const std::string& text, const std::string& where) {
  for (const char* placeholder :
       {"%canonical_option%", "%option%", "%original_token%", "%value%", "%prefix%"}) {
    PPSTAGE_CHECK(text.find(placeholder) == std::string::npos, where, " holds '", placeholder,
                  "', which ppstage does not accept in options");
  }
}

po::parsed_options storeConfigFile(const std::string& path, const po::options_description& options,
                                   po::variables_map& vm) {
  // A config file is a page of settings: a larger one is not what the user meant to give.
  constexpr uint64_t kMaxConfigBytes = 1 << 20;
  const std::string text = readFile(path, "config file", kMaxConfigBytes);
  refusePlaceholders(text, "config file '" + path + "'");
  std::istringstream file(text);
  po::parsed_options parsed(&options);
  try {
    parsed = po::parse_config_file(file, options, /*allow_unregistered=*/true);
    // Options of other commands (a [compile] section read by `split`) are fine; a name no
    // command knows is a typo and must not pass silently.
    const std::set<std::string> known = knownConfigOptions();
    for (const auto& option : parsed.options) {
      if (option.unregistered) {
        PPSTAGE_CHECK(known.count(option.string_key) > 0, "unknown option '", option.string_key,
                      "' in config file '", path, "'", didYouMean(option.string_key, options));
      }
    }
    po::store(parsed, vm);
  } catch (const po::error& e) {
    PPSTAGE_FAIL("config file '", path, "': ", e.what());
  }
  return parsed;
}

}  // namespace

// Option validators for the named choices, found by Boost.Program_options through
// argument-dependent lookup: an option's text becomes its enum here, once, with the error
// line parseChoice gives ("--compile.mode must be none, stage or block; got 'x'").
// (Its `int` beats the `long` of Boost's own generic validator.)
template <typename Enum, typename = decltype(Choices<Enum>::kNames)>
void validate(boost::any& value, const std::vector<std::string>& texts, Enum*, int) {
  po::validators::check_first_occurrence(value);
  value = parseChoice<Enum>(po::validators::get_single_string(texts));
}
// --train.loss also takes "auto": no loss chosen, the model's input decides.
void validate(boost::any& v, const std::vector<std::string>& s, std::optional<LossKind>*, int) {
  po::validators::check_first_occurrence(v);
  const std::string& text = po::validators::get_single_string(s);
  v = text == "auto" ? std::optional<LossKind>() : parseChoice<LossKind>(text, "auto");
}

void addModelOptions(po::options_description& desc, ModelConfig& m) {
  po::options_description section("Model [model]");
  auto add = section.add_options();
  add("model.name", po::value(&m.name)->default_value(m.name),
      "built-in model (gpt, mlp) or path to a TorchScript file saved with torch.jit.save");
  add("model.layers", po::value(&m.layers)->default_value(m.layers),
      "number of blocks of a built-in model");
  add("model.d_model", po::value(&m.d_model)->default_value(m.d_model), "model width");
  add("model.heads", po::value(&m.heads)->default_value(m.heads), "gpt attention heads");
  add("model.vocab_size", po::value(&m.vocab_size)->default_value(m.vocab_size),
      "gpt vocabulary size; upper bound of default token inputs");
  add("model.seq_len", po::value(&m.seq_len)->default_value(m.seq_len), "sequence length");
  add("model.mlp_ratio", po::value(&m.mlp_ratio)->default_value(m.mlp_ratio),
      "MLP hidden width as a multiple of d_model");
  add("model.tie_embeddings", po::value(&m.tie_embeddings)->default_value(m.tie_embeddings),
      "gpt: the LM head shares the token embedding's weight (true|false)");
  add("model.dropout", po::value(&m.dropout)->default_value(m.dropout, shortestText(m.dropout)),
      "built-in gpt and mlp: dropout probability (gpt: embeddings, attention weights, "
      "attention and MLP outputs; mlp: MLP outputs); 0 disables");
  add("model.input_dtype",
      po::value(&m.input_dtype)->default_value(m.input_dtype, toString(m.input_dtype)),
      "example input dtype for a model file: int64 (token ids) or float32");
  add("model.input_shape",
      po::value<std::string>()->default_value("")->notifier(
          [&m](const std::string& text) { m.input_shape = parseShape("model.input_shape", text); }),
      "example input shape for a model file, batch first (e.g. 8,4,32); the batch size used "
      "is --train.batch_size; empty: (train.batch_size, model.seq_len)");
  add("model.inputs",
      po::value<std::string>()->default_value("")->notifier(
          [&m](const std::string& text) { m.inputs = splitList(text); }),
      "data fields fed to forward's arguments, comma-separated ARG=FIELD (or FIELD, for an "
      "argument of that name); fields not listed are not fed; empty: every field but the "
      "target, matched to forward's arguments by name");
  desc.add(section);
}

void addStageCountOption(po::options_description& desc, PipelineConfig& p) {
  po::options_description section("Pipeline [pipeline]");
  auto add = section.add_options();
  add("pipeline.stages", po::value(&p.stages)->default_value(p.stages),
      "number of stages; 0: one more than the number of split points");
  desc.add(section);
}

void addSplitOptions(po::options_description& desc, PipelineConfig& p) {
  po::options_description section("Splitting [pipeline]");
  auto add = section.add_options();
  add("pipeline.split_points",
      po::value<std::string>()->default_value("")->notifier(
          [&p](const std::string& text) { p.split_points = splitList(text); }),
      "comma-separated module paths at which a stage starts (e.g. layers.4,layers.8); "
      "empty: balance automatically");
  add("pipeline.balance", po::value(&p.balance)->default_value(p.balance, toString(p.balance)),
      "what automatic splitting balances across stages: flops (each unit's forward FLOPs "
      "counted on the example input; params where none are counted) | params | time (each "
      "unit's forward and backward, measured on one micro-batch, the loss included)");
  desc.add(section);
}

namespace {

void addPluginOption(po::options_description_easy_init& add, PipelineConfig& p) {
  add("pipeline.schedule_plugin", po::value(&p.schedule_plugin)->default_value(""),
      "shared library exporting ppstage_register_schedules, adding more schedules");
}

}  // namespace

void addScheduleOptions(po::options_description& desc, PipelineConfig& p) {
  po::options_description section("Schedule [pipeline]");
  auto add = section.add_options();
  add("pipeline.schedule", po::value(&p.schedule)->default_value(p.schedule),
      "gpipe | 1f1b | interleaved-1f1b | zb-h1 | zb-v | a plugin's schedule | path/to/table.csv");
  add("pipeline.microbatches", po::value(&p.microbatches)->default_value(p.microbatches),
      "micro-batches per step; 0: twice the number of stages");
  add("pipeline.stages_per_rank", po::value(&p.stages_per_rank)->default_value(p.stages_per_rank),
      "stages on each pipeline rank (virtual stages, for interleaved-1f1b)");
  add("pipeline.placement",
      po::value(&p.placement)->default_value(p.placement, toString(p.placement)),
      "stage-to-rank placement: loop (0 1 2 3 0 1 2 3) | v (0 1 2 3 3 2 1 0)");
  add("pipeline.rank_order",
      po::value(&p.rank_order)->default_value(p.rank_order, toString(p.rank_order)),
      "how world ranks map to replicas and pipeline ranks, outermost first (tp is always "
      "innermost): dp-pp-tp (rank = (dp_rank x pp + pp_rank) x tp + tp_rank: a pipeline's ranks "
      "adjacent) | pp-dp-tp (rank = (pp_rank x dp + dp_rank) x tp + tp_rank: a stage's "
      "replicas adjacent, so with mpirun filling hosts slot by slot the data-parallel "
      "all-reduces stay inside a host and the pipeline crosses between hosts)");
  addPluginOption(add, p);
  desc.add(section);
}

void addSchedulePluginOption(po::options_description& desc, PipelineConfig& p) {
  po::options_description section("Schedules [pipeline]");
  auto add = section.add_options();
  addPluginOption(add, p);
  desc.add(section);
}

void addTrainOptions(po::options_description& desc, TrainConfig& t) {
  po::options_description section("Training [train]");
  auto add = section.add_options();
  add("train.batch_size", po::value(&t.batch_size)->default_value(t.batch_size),
      "global batch size (sequences per step)");
  add("train.seed", po::value(&t.seed)->default_value(t.seed),
      "seed of parameter initialisation and example inputs");
  add("train.tp", po::value(&t.tp)->default_value(t.tp),
      "tensor-parallel ranks per stage (adjacent ranks): each stage's attention and MLP "
      "regions, found in its graph, are sharded over them (heads and hidden features); a "
      "region that cannot be proven stays replicated, and the start-up lines say why");
  add("train.tp_require", po::value(&t.tp_require)->default_value(t.tp_require),
      "with --train.tp: a regex over module paths (e.g. 'layers\\..*'); a region matching it "
      "that cannot be sharded is an error (exit 2) naming it and why, instead of running "
      "replicated");
  add("train.recompute", po::value(&t.recompute)->default_value(t.recompute, toString(t.recompute)),
      "activation recomputation of the model's blocks (the repeated modules --compile.mode "
      "block finds, or --compile.block_pattern's): none | full (a block keeps only its inputs "
      "after its forward, and runs its forward again in its backward) | selective (a block "
      "also keeps the outputs of its matrix products with a weight, convolutions and "
      "attention kernels, and runs the ops between them again: norms, softmax, dropout, "
      "elementwise ops, attention's score products)");
  add("train.recompute_blocks", po::value(&t.recompute_blocks)->default_value(t.recompute_blocks),
      "which blocks recompute: empty, all; a regex over their module paths (whole path, e.g. "
      "'h\\.[0-3]'); N or N0,N1,...: the first N blocks of every stage (the first Ns of stage "
      "s, none past the list); every:N: the N-th, 2N-th, ... block of the model");
  add("train.shard_optimizer",
      po::value(&t.shard_optimizer)->default_value(t.shard_optimizer)->implicit_value(true),
      "shard the optimizer's fp32 masters and state over the data-parallel replicas (ZeRO-1): "
      "gradients reduce-scattered in the all-reduce's buckets, each replica steps its share, "
      "the parameters all-gathered; optimizer memory per rank falls to 1/dp. At dp 1 it does "
      "nothing (a warning says so)");
  desc.add(section);
}

void addTrainingLoopOptions(po::options_description& desc, TrainConfig& t) {
  po::options_description section("Training loop [train]");
  auto add = section.add_options();
  add("train.steps", po::value(&t.steps)->default_value(t.steps), "optimizer steps to run");
  add("train.lr", po::value(&t.lr)->default_value(t.lr, shortestText(t.lr)),
      "learning rate (the peak, after warm-up)");
  add("train.lr_schedule",
      po::value(&t.lr_schedule)->default_value(t.lr_schedule, toString(t.lr_schedule)),
      "the learning rate after warm-up: constant | cosine (half a cosine from lr down to "
      "min_lr at the last step) | linear (a straight line from lr down to min_lr)");
  add("train.warmup_steps", po::value(&t.warmup_steps)->default_value(t.warmup_steps),
      "steps over which the learning rate rises linearly to lr (step k of W: lr x k / W)");
  add("train.min_lr", po::value(&t.min_lr)->default_value(t.min_lr, shortestText(t.min_lr)),
      "where cosine and linear decay end, at the last step");
  add("train.weight_decay",
      po::value(&t.weight_decay)->default_value(t.weight_decay, shortestText(t.weight_decay)),
      "weight decay (decoupled for adamw, L2 for sgd)");
  add("train.grad_clip",
      po::value(&t.grad_clip)->default_value(t.grad_clip, shortestText(t.grad_clip)),
      "clip the global gradient norm, over all stages, to this value; 0: no clipping");
  add("train.optimizer", po::value(&t.optimizer)->default_value(t.optimizer, toString(t.optimizer)),
      "adamw | sgd");
  add("train.device", po::value(&t.device)->default_value(t.device),
      "cpu | cuda | cuda:N: where each rank's parameters, activations and optimizer state "
      "live. cuda: one GPU per rank, the rank's local rank on its host (Open MPI's "
      "OMPI_COMM_WORLD_LOCAL_RANK); cuda:N: GPU N. The model is captured and split on the "
      "CPU, then each stage moves to its rank's GPU");
  add("train.precision", po::value(&t.precision)->default_value(t.precision, toString(t.precision)),
      "fp32 | bf16: forward, backward, buffers and the messages between stages in bfloat16, "
      "with fp32 master weights, optimizer state, gradient sync and norm, and an fp32 loss "
      "(unless the model computes it); falls back to fp32, saying why, where the model has "
      "an op without a bf16 kernel");
  add("train.loss", po::value(&t.loss)->default_value(t.loss, "auto"),
      "cross_entropy (logits (N, C) against labels (N), or (N, T, V) against (N, T)) | mse | "
      "model (forward takes the labels and returns the loss: a scalar, or first in a tuple, or "
      "under 'loss' in a dict; the step's loss is the mean over its micro-batches) | "
      "auto: from the data (token windows and integer labels: cross_entropy; float "
      "targets: mse; synthetic and text: cross_entropy when the model takes token ids)");
  add("train.ignore_index", po::value(&t.ignore_index)->default_value(t.ignore_index),
      "cross_entropy: targets equal to this do not count (the loss is the mean over the "
      "others, over the whole step)");
  add("train.momentum", po::value(&t.momentum)->default_value(t.momentum, shortestText(t.momentum)),
      "sgd momentum (0: none)");
  add("train.nonfinite", po::value(&t.nonfinite)->default_value(t.nonfinite, toString(t.nonfinite)),
      "a step whose loss or global gradient norm is NaN or inf: stop (the run ends there, "
      "before the optimizer applies it, exit code 3) | skip (the update is dropped and the "
      "run goes on)");
  add("train.max_skipped", po::value(&t.max_skipped)->default_value(t.max_skipped),
      "with --train.nonfinite skip: stop (exit code 3) after this many skipped steps in a row");
  add("train.dp", po::value(&t.dp)->default_value(t.dp),
      "data-parallel replicas of the pipeline; the world size must be pipeline ranks x dp x tp");
  add("train.threads", po::value(&t.threads)->default_value(t.threads),
      "intra-op threads per rank; 0: the machine's cores divided by the ranks on it");
  desc.add(section);
}

void addCompileOptions(po::options_description& desc, CompileConfig& c) {
  po::options_description section("Compilation [compile]");
  auto add = section.add_options();
  add("compile.mode", po::value(&c.mode)->default_value(c.mode, toString(c.mode)),
      "none: each stage graph runs unoptimized (the numerics baseline) | stage: one "
      "TorchScript profiling executor per stage (specialization, autodiff, fusion) | block: "
      "one per block, identical blocks sharing one compiled executor");
  add("compile.block_pattern", po::value(&c.block_pattern)->default_value(c.block_pattern),
      "block mode: a regex matching the module paths of the blocks (e.g. 'layers\\.[0-9]+'); "
      "empty: instances of the module types that repeat");
  add("compile.dynamic", po::value(&c.dynamic)->default_value(c.dynamic),
      "false: each new input shape gets its own statically specialized executor; true: "
      "one executor per graph takes every shape (TorchScript's dynamic fusion strategy, "
      "shape-generic graphs, depth 2)");
  add("compile.max_respecializations",
      po::value(&c.max_respecializations)->default_value(c.max_respecializations),
      "warn when graphs have been compiled again for new input shapes more often than this");
  desc.add(section);
}

void addDataOptions(po::options_description& desc, DataConfig& d) {
  po::options_description section("Data [data]");
  auto add = section.add_options();
  add("data.path", po::value(&d.path)->default_value(d.path),
      "a data file (or a folder of .npy files) read as --data.format says | synthetic (random "
      "samples from the seed, shaped like the model's input) | empty: the public-domain text "
      "embedded in ppstage");
  add("data.format", po::value(&d.format)->default_value(d.format, toString(d.format)),
      "text (bytes, byte-level tokens) | tokens (a flat token file, windows of "
      "model.seq_len + 1 tokens; with or without a 256-int32 header) | npy (a .npy file, or a "
      "folder of them, one per named tensor) | tensors (torch.save of a dict of tensors) | "
      "idx (MNIST's IDX files, gzipped or not) | auto: by extension and magic number");
  add("data.token_dtype",
      po::value(&d.token_dtype)->default_value(d.token_dtype, toString(d.token_dtype)),
      "the token type of a tokens file without a header: uint16 | uint32");
  add("data.targets", po::value(&d.targets)->default_value(d.targets),
      "npy: the targets' .npy file beside one --data.path x.npy; idx: the labels file "
      "(default: the images file's name with images-idx3 made labels-idx1)");
  add("data.target", po::value(&d.target)->default_value(d.target),
      "the field of the data that is the loss's target; empty: the one named labels, label, "
      "targets or target");
  add("data.val_path", po::value(&d.val_path)->default_value(d.val_path),
      "the validation set for --eval.every, read as --data.path is (its fields must be the "
      "training data's)");
  add("data.seq_len_policy",
      po::value(&d.seq_len_policy)->default_value(d.seq_len_policy, toString(d.seq_len_policy)),
      "the length each micro-batch is padded to, padding masked out of the loss: fixed "
      "(--model.seq_len) | bucket (the shortest of --data.buckets its longest document fits) | "
      "variable (its longest document's); bucket and variable cut documents (--data.documents) "
      "and group each step's documents by length");
  add("data.documents", po::value(&d.documents)->default_value(d.documents),
      "text and token files as documents, not windows of --model.seq_len: a text's "
      "blank-line-separated paragraphs, a token file's runs between --data.eot tokens, each "
      "cut at --model.seq_len + 1 tokens; with fixed, each padded to --model.seq_len");
  add("data.buckets",
      po::value<std::string>()->default_value("")->notifier(
          [&d](const std::string& text) { d.buckets = parseShape("data.buckets", text); }),
      "bucket: comma-separated ascending lengths (e.g. 64,128,256), at most --model.seq_len, "
      "which is always the last; empty: a quarter, half and all of --model.seq_len");
  add("data.eot", po::value(&d.eot)->default_value(d.eot),
      "documents of a token file (--data.documents, bucket, variable): the end-of-text token "
      "that ends each one (50256 for GPT-2's tokens); -1: none");
  desc.add(section);
}

void addEvalOptions(po::options_description& desc, EvalConfig& e) {
  po::options_description section("Evaluation [eval]");
  auto add = section.add_options();
  add("eval.every", po::value(&e.every)->default_value(e.every),
      "evaluate on --data.val_path after every N steps and after the last (forward only, in "
      "eval mode: no dropout, BatchNorm on its running statistics); 0: never");
  add("eval.batches", po::value(&e.batches)->default_value(e.batches),
      "global batches (--train.batch_size samples) of the validation set per evaluation, "
      "from its start; fewer when it is smaller");
  desc.add(section);
}

void addOutputOptions(po::options_description& desc, OutputConfig& o) {
  po::options_description section("Output [output]");
  auto add = section.add_options();
  add("output.log_every", po::value(&o.log_every)->default_value(o.log_every),
      "print a line every N steps (and for the last); 0: only the summary");
  add("output.metrics_json", po::value(&o.metrics_json)->default_value(o.metrics_json),
      "write the run's metrics (losses, step times, per-rank busy/idle/RSS, predicted "
      "makespan) to this JSON file at the end");
  add("output.metrics_jsonl", po::value(&o.metrics_jsonl)->default_value(o.metrics_jsonl),
      "write one JSON line per step (loss, lr, grad_norm, seconds, tokens/s, bubble, epoch) "
      "and per evaluation to this file as the run goes, each flushed when written; a resumed "
      "run appends to it");
  add("output.tensorboard", po::value(&o.tensorboard)->default_value(o.tensorboard),
      "write TensorBoard event files into this directory as the run goes (train/loss, "
      "train/lr, train/grad_norm, train/tokens_per_s, ..., eval/loss): tensorboard --logdir "
      "DIR");
  add("output.params_dir", po::value(&o.params_dir)->default_value(o.params_dir),
      "write every stage's final parameters to this directory (params-rank<r>.pt), for "
      "ppstage compare-runs");
  add("output.trace", po::value(&o.trace)->default_value(o.trace),
      "record every rank's actions (F, B, I, W, sends and receives posted and waited for, "
      "gradient sync, all-reduce, optimizer) on one clock and write them at the end to this "
      "Chrome trace JSON file (open in ui.perfetto.dev; draw with ppstage timeline)");
  desc.add(section);
}

void addCheckpointOptions(po::options_description& desc, CheckpointConfig& c) {
  po::options_description section("Checkpoints [checkpoint]");
  auto add = section.add_options();
  add("checkpoint.dir", po::value(&c.dir)->default_value(c.dir),
      "save checkpoints to DIR/step-<8 digits>/ (parameters, optimizer state, step, data "
      "position, random state, manifest.json with checksums, written last); empty: none");
  add("checkpoint.every", po::value(&c.every)->default_value(c.every),
      "save every K steps; 0: only after the last step and when stopped by SIGTERM or SIGINT");
  add("checkpoint.keep", po::value(&c.keep)->default_value(c.keep),
      "keep the N newest complete checkpoints; older ones are removed once a new one is "
      "complete");
  add("checkpoint.resume", po::value(&c.resume)->default_value(c.resume),
      "true: continue from the newest complete checkpoint in --checkpoint.dir (at any "
      "layout), or start fresh when there is none");
  desc.add(section);
}

void addCommOptions(po::options_description& desc, CommConfig& c) {
  po::options_description section("Communication [comm]");
  auto add = section.add_options();
  add("comm.timeout_s",
      po::value(&c.timeout_s)->default_value(c.timeout_s, shortestText(c.timeout_s)),
      "seconds any wait for another rank may take before the job ends with an error naming "
      "the rank, stage and micro-batch (a dead or stuck peer)");
  add("comm.receives_ahead", po::value(&c.receives_ahead)->default_value(c.receives_ahead),
      "post each receive as early as the receive buffers allow (one more per stage and "
      "direction than the schedule keeps in flight); false: just before the compute that "
      "needs it");
  add("comm.backend", po::value(&c.backend)->default_value(c.backend, toString(c.backend)),
      "auto | mpi | nccl: what carries the activations and gradients between stages. auto: "
      "NCCL for CUDA tensors (one GPU per rank), MPI for CPU ones; mpi with --train.device "
      "cuda stages them through host memory, so several ranks may share a GPU");
  desc.add(section);
}

void addPlanOptions(po::options_description& desc, PlanConfig& p) {
  po::options_description section("Planning [plan]");
  auto add = section.add_options();
  add("plan.ranks", po::value(&p.ranks)->default_value(p.ranks),
      "ranks to plan for (dp x pp); train --pipeline.auto: 0 plans for the job's ranks");
  add("plan.memory_mb", po::value(&p.memory_mb)->default_value(p.memory_mb),
      "each rank's budget of tensor memory in MB (parameters, gradients, optimizer state, "
      "in-flight activations); a configuration predicted over it recomputes blocks per stage "
      "where the model has them (--train.recompute, chosen), or is dropped; 0: none");
  add("plan.costs", po::value(&p.costs)->default_value(p.costs),
      "plan from this cost profile (written by --plan.save_costs) instead of measuring the "
      "model");
  add("plan.save_costs", po::value(&p.save_costs)->default_value(p.save_costs),
      "write the measured cost profile (JSON: each unit's F, B, I, W seconds and bytes at two "
      "micro-batch sizes) here");
  add("plan.schedules",
      po::value<std::string>()->default_value("")->notifier(
          [&p](const std::string& text) { p.schedules = splitList(text); }),
      "comma-separated schedules to consider; empty: every built-in one and the plugin's");
  add("plan.top", po::value(&p.top)->default_value(p.top),
      "how many of the best to print (the search keeps and refines at least 10 whatever this "
      "says)");
  add("plan.hosts", po::value(&p.hosts)->default_value(p.hosts),
      "hosts the ranks are on, each holding ranks / hosts adjacent ranks (mpirun's default "
      "mapping): traffic between hosts costs the links measured between them, and the plan "
      "chooses --pipeline.rank_order; 0: the job's hosts under mpirun (the ranks that share "
      "memory), one otherwise");
  add("plan.link_latency_us",
      po::value(&p.link_latency_us)
          ->default_value(p.link_latency_us, shortestText(p.link_latency_us)),
      "one process: a message's fixed cost between two ranks, in microseconds (under mpirun "
      "-np P the plan measures it, and the two below)");
  add("plan.link_gbps",
      po::value(&p.link_gbps)->default_value(p.link_gbps, shortestText(p.link_gbps)),
      "the bandwidth between two ranks in GB/s (measured: ppstage bench-comm)");
  add("plan.allreduce_gbps",
      po::value(&p.allreduce_gbps)->default_value(p.allreduce_gbps, shortestText(p.allreduce_gbps)),
      "the bandwidth of an all-reduce of data-parallel gradients in GB/s (a ring moves 2 (n - 1) "
      "/ n of the bytes)");
  desc.add(section);
}

void addAutoPlanOption(po::options_description& desc, PipelineConfig& p) {
  po::options_description section("Automatic configuration [pipeline]");
  section.add_options()(
      "pipeline.auto", po::value(&p.auto_plan)->default_value(p.auto_plan),
      "plan first (as ppstage plan does, with the [plan] options) and train with the chosen "
      "layout, schedule, micro-batches and cut; the options it chooses are ignored");
  desc.add(section);
}

void addAllOptions(po::options_description& desc, Config& c) {
  addModelOptions(desc, c.model);
  addStageCountOption(desc, c.pipeline);
  addSplitOptions(desc, c.pipeline);
  addScheduleOptions(desc, c.pipeline);
  addTrainOptions(desc, c.train);
  addTrainingLoopOptions(desc, c.train);
  addCompileOptions(desc, c.compile);
  addDataOptions(desc, c.data);
  addEvalOptions(desc, c.eval);
  addOutputOptions(desc, c.output);
  addCheckpointOptions(desc, c.checkpoint);
  addCommOptions(desc, c.comm);
  addAutoPlanOption(desc, c.pipeline);
  addPlanOptions(desc, c.plan);
}

bool parseOptions(int argc, const char* const* argv, po::options_description& options,
                  const std::string& usage, std::ostream& out, std::set<std::string>* given,
                  std::map<std::string, std::string>* given_text) {
  std::string config_path;
  po::options_description general("General");
  auto add = general.add_options();
  add("help,h", "print this help and exit");
  add("config", po::value(&config_path),
      "INI file with [section] key = value options; "
      "the command line overrides it");
  options.add(general);

  for (int i = 1; i < argc; ++i) {
    refusePlaceholders(argv[i], detail::concat("the command-line argument '", argv[i], "'"));
  }
  Config ignored;
  po::options_description parsed_options;
  parsed_options.add(options).add(otherCommandsOptions(options, ignored));
  po::variables_map vm;
  try {
    // No guessing of abbreviations: `--train.step 3` is refused on the command line as it is
    // in a config file, not taken for --train.steps.
    const int style =
        po::command_line_style::default_style & ~po::command_line_style::allow_guessing;
    po::parsed_options command_line =
        po::command_line_parser(argc, argv).options(parsed_options).style(style).run();
    keepLastOccurrences(command_line);
    po::store(command_line, vm);
    if (vm.count("help")) {
      out << usage << "\n\n" << options << "\n";
      return false;
    }
    if (given_text != nullptr) recordTexts(command_line, *given_text);
    if (vm.count("config")) {
      const po::parsed_options file = storeConfigFile(vm["config"].as<std::string>(), options, vm);
      if (given_text != nullptr) recordTexts(file, *given_text);
    }
    po::notify(vm);
    for (const auto& [name, value] : vm) {
      const bool own = options.find_nothrow(name, /*approx=*/false) != nullptr;
      if (given != nullptr && own && !value.defaulted()) given->insert(name);
    }
  } catch (const po::unknown_option& e) {
    throw Error(e.what() + didYouMean(e.get_option_name(), options));
  } catch (const po::error& e) {
    throw Error(e.what());
  }
  return true;
}

}  // namespace ppstage
