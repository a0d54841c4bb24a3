// Checks of each options section across its fields (include/ppstage/config/options.h),
// after parsing (options.cpp): one line naming the option and the value it got.
#include "ppstage/config/options.h"

#include <unistd.h>

#include <regex>
#include <string>

#include "ppstage/core/error.h"

namespace ppstage {

namespace {

// Sizes that cannot be built here end in one line, not in a failed allocation: every rank
// builds the whole model before it keeps its stages. In fp32: a gpt block's attention and
// MLP weights, its embeddings and head; an mlp block's MLP, and its head.
void checkBuiltinModelFits(const ModelConfig& m) {
  const bool gpt = m.name == kGptModel;
  const double d = static_cast<double>(m.d_model);
  const double mlp = 2.0 * static_cast<double>(m.mlp_ratio) * d * d;
  const double params =
      gpt ? static_cast<double>(m.layers) * (4.0 * d * d + mlp) +
                (2.0 * static_cast<double>(m.vocab_size) + static_cast<double>(m.seq_len)) * d
          : static_cast<double>(m.layers) * mlp + d * d;
  const double memory = static_cast<double>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGESIZE);
  const std::string sizes = (gpt ? detail::concat("--model.vocab_size ", m.vocab_size,
                                                  ", --model.seq_len ", m.seq_len, ", ")
                                 : std::string()) +
                            detail::concat("--model.layers ", m.layers, ", --model.d_model ",
                                           m.d_model, ", --model.mlp_ratio ", m.mlp_ratio);
  PPSTAGE_CHECK(4.0 * params <= memory, "the built-in ", m.name, " of ", sizes, " has about ",
                params, " parameters (", 4.0 * params / 1e9,
                " GB in fp32), more than this machine's memory (", memory / 1e9, " GB)");
}

}  // namespace

void validate(const ModelConfig& m) {
  PPSTAGE_CHECK(!m.name.empty(), "--model.name must name a built-in model (gpt, mlp) or a file");
  PPSTAGE_CHECK(m.layers >= 1, "--model.layers must be at least 1; got ", m.layers);
  PPSTAGE_CHECK(m.d_model >= 1, "--model.d_model must be at least 1; got ", m.d_model);
  PPSTAGE_CHECK(m.heads >= 1 && m.d_model % m.heads == 0, "--model.heads must divide ",
                "--model.d_model (", m.d_model, "); got ", m.heads);
  PPSTAGE_CHECK(m.vocab_size >= 2, "--model.vocab_size must be at least 2; got ", m.vocab_size);
  PPSTAGE_CHECK(m.seq_len >= 1, "--model.seq_len must be at least 1; got ", m.seq_len);
  PPSTAGE_CHECK(m.mlp_ratio >= 1, "--model.mlp_ratio must be at least 1; got ", m.mlp_ratio);
  PPSTAGE_CHECK(m.dropout >= 0 && m.dropout < 1, "--model.dropout must be in [0, 1); got ",
                m.dropout);
  PPSTAGE_CHECK(m.dropout == 0 || m.builtin(), "--model.dropout applies ",
                "to the built-in gpt and mlp; a model file keeps its own dropout modules");
  if (m.builtin()) checkBuiltinModelFits(m);
}

void validate(const PipelineConfig& p) {
  PPSTAGE_CHECK(p.stages >= 0, "--pipeline.stages must be 0 (automatic) or positive; got ",
                p.stages);
  PPSTAGE_CHECK(p.stages == 0 || p.split_points.empty() ||
                    p.stages == static_cast<int64_t>(p.split_points.size()) + 1,
                "--pipeline.stages is ", p.stages, " but ", p.split_points.size(),
                " split points make ", p.split_points.size() + 1, " stages");
  PPSTAGE_CHECK(p.microbatches >= 0, "--pipeline.microbatches must be positive (or 0 for ",
                "twice the stages); got ", p.microbatches);
  PPSTAGE_CHECK(p.stages_per_rank >= 1, "--pipeline.stages_per_rank must be at least 1; got ",
                p.stages_per_rank);
}

void validate(const CommConfig& c) {
  PPSTAGE_CHECK(c.timeout_s > 0, "--comm.timeout_s must be positive; got ", c.timeout_s);
}

void validate(const TrainConfig& t) {
  PPSTAGE_CHECK(t.batch_size >= 1, "--train.batch_size must be at least 1; got ", t.batch_size);
  PPSTAGE_CHECK(t.steps >= 1, "--train.steps must be at least 1; got ", t.steps);
  PPSTAGE_CHECK(t.lr > 0, "--train.lr must be positive; got ", t.lr);
  PPSTAGE_CHECK(t.weight_decay >= 0, "--train.weight_decay must not be negative; got ",
                t.weight_decay);
  PPSTAGE_CHECK(t.grad_clip >= 0, "--train.grad_clip must be positive, or 0 for no clipping; ",
                "got ", t.grad_clip);
  PPSTAGE_CHECK(t.dp >= 1, "--train.dp must be at least 1; got ", t.dp);
  PPSTAGE_CHECK(t.tp >= 1, "--train.tp must be at least 1; got ", t.tp);
  if (!t.tp_require.empty()) {
    try {
      std::regex pattern(t.tp_require, std::regex::ECMAScript);
    } catch (const std::regex_error& e) {
      PPSTAGE_FAIL("--train.tp_require '", t.tp_require,
                   "' is not a regular expression: ", e.what());
    }
  }
  PPSTAGE_CHECK(t.recompute_blocks.empty() || t.recompute != RecomputePolicy::kNone,
                "--train.recompute_blocks '", t.recompute_blocks,
                "' needs --train.recompute full or selective");
  PPSTAGE_CHECK(t.threads >= 0, "--train.threads must be 0 (automatic) or positive; got ",
                t.threads);
  PPSTAGE_CHECK(t.momentum >= 0 && t.momentum < 1, "--train.momentum must be in [0, 1); got ",
                t.momentum);
  PPSTAGE_CHECK(t.momentum == 0 || t.optimizer == OptimizerKind::kSgd,
                "--train.momentum applies to --train.optimizer sgd");
  PPSTAGE_CHECK(t.max_skipped >= 1, "--train.max_skipped must be at least 1; got ", t.max_skipped);
  PPSTAGE_CHECK(t.warmup_steps >= 0, "--train.warmup_steps must not be negative; got ",
                t.warmup_steps);
  PPSTAGE_CHECK(t.min_lr >= 0 && t.min_lr <= t.lr, "--train.min_lr must be in [0, --train.lr ",
                t.lr, "]; got ", t.min_lr);
}

void validate(const CheckpointConfig& c) {
  PPSTAGE_CHECK(c.every >= 0, "--checkpoint.every must be 0 (only at the end) or positive; got ",
                c.every);
  PPSTAGE_CHECK(c.keep >= 1, "--checkpoint.keep must be at least 1; got ", c.keep);
  PPSTAGE_CHECK(!c.resume || !c.dir.empty(), "--checkpoint.resume needs --checkpoint.dir");
}

void validate(const DataConfig& d) {
  for (size_t i = 0; i < d.buckets.size(); ++i) {
    PPSTAGE_CHECK(i == 0 || d.buckets[i] > d.buckets[i - 1],
                  "--data.buckets must be ascending; got ", d.buckets[i - 1], " then ",
                  d.buckets[i]);
  }
  PPSTAGE_CHECK(d.buckets.empty() || d.seq_len_policy == SeqLenPolicy::kBucket,
                "--data.buckets applies to --data.seq_len_policy bucket");
  PPSTAGE_CHECK(d.eot >= -1, "--data.eot must be a token id, or -1 for none; got ", d.eot);
  PPSTAGE_CHECK(!d.cutsDocuments() || d.path != "synthetic",
                "synthetic data has no documents: --data.seq_len_policy ",
                toString(d.seq_len_policy), " and --data.documents need text or a token file");
}

void validate(const CompileConfig& c) {
  PPSTAGE_CHECK(c.max_respecializations >= 0, "--compile.max_respecializations must not be ",
                "negative; got ", c.max_respecializations);
}

void validate(const PlanConfig& p) {
  PPSTAGE_CHECK(p.ranks >= 0, "--plan.ranks must not be negative; got ", p.ranks);
  PPSTAGE_CHECK(p.memory_mb >= 0, "--plan.memory_mb must not be negative; got ", p.memory_mb);
  PPSTAGE_CHECK(p.top >= 1, "--plan.top must be at least 1; got ", p.top);
  PPSTAGE_CHECK(p.hosts >= 0, "--plan.hosts must not be negative; got ", p.hosts);
  PPSTAGE_CHECK(p.link_latency_us >= 0, "--plan.link_latency_us must not be negative; got ",
                p.link_latency_us);
  PPSTAGE_CHECK(p.link_gbps > 0, "--plan.link_gbps must be positive; got ", p.link_gbps);
  PPSTAGE_CHECK(p.allreduce_gbps > 0, "--plan.allreduce_gbps must be positive; got ",
                p.allreduce_gbps);
}

void validate(const Config& c) {
  validate(c.model);
  validate(c.data);
  validate(c.pipeline);
  validate(c.train);
  validate(c.comm);
  validate(c.compile);
  validate(c.output);
  validate(c.checkpoint);
  validate(c.plan);
  PPSTAGE_CHECK(c.eval.every >= 0, "--eval.every must not be negative; got ", c.eval.every);
  PPSTAGE_CHECK(c.eval.batches >= 1, "--eval.batches must be at least 1; got ", c.eval.batches);
  PPSTAGE_CHECK(c.eval.every == 0 || !c.data.val_path.empty(),
                "--eval.every needs a validation set: --data.val_path");
}

void validate(const OutputConfig& o) {
  PPSTAGE_CHECK(o.log_every >= 0, "--output.log_every must not be negative; got ", o.log_every);
}

}  // namespace ppstage
