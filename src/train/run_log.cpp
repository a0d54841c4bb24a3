// See run_log.h.
#include "run_log.h"

#include "local_stages.h"

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <ostream>
#include <sstream>

#include "ppstage/comm/mpi_session.h"
#include "ppstage/config/config.h"
#include "ppstage/core/cpu_features.h"
#include "ppstage/core/text.h"
#include "ppstage/core/topology.h"
#include "ppstage/observe/tensor_memory.h"
#include "ppstage/train/job_setup.h"
#include "step_runner.h"

namespace ppstage {
namespace {

// " (auto: labels are int64)" when --train.loss auto picked the loss, what the model is fed
// for --train.loss model; else "".
std::string lossChoiceText(const Config& c, const JobSetup& setup) {
  const DataRoles& roles = setup.layout().roles;
  if (setup.layout().loss == LossKind::kModel && setup.data() != nullptr) {
    const size_t fed = static_cast<size_t>(
        std::find(roles.inputs.begin(), roles.inputs.end(), roles.target) - roles.inputs.begin());
    return " (forward takes '" + setup.data()->fields().at(roles.target).name + "' as '" +
           setup.model().split.graph.input_names.at(fed) + "' and returns the loss)";
  }
  if (c.train.loss || setup.data() == nullptr) return "";
  const SampleField& target = setup.data()->fields().at(setup.layout().roles.target);
  return " (auto: " + target.name + " are " + dtypeName(target.sample.dtype) + ")";
}

// "bf16 (...), messages 32.0 KiB / 32.0 KiB per micro-batch": what the stages compute in,
// and the bytes of one micro-batch's activations at each cut.
std::string precisionText(const Config& c, const JobSetup& setup) {
  const JobLayout& layout = setup.layout();
  std::ostringstream out;
  if (layout.compute_dtype == at::kBFloat16) {
    out << "bf16 (forward, backward, messages and buffers; master weights, optimizer state, "
           "gradient sync and norm in fp32, and the loss unless the model computes it)";
    if (thisCpusBf16Instructions().empty()) {
      out << "; warning: this CPU lists no bf16 instructions (avx512_bf16, amx_bf16, ARM "
             "bf16), so LibTorch converts around every op and bf16 can run slower than fp32";
    }
  } else if (c.train.precision == Precision::kBf16) {
    out << "fp32 (bf16 falls back: " << setup.model().split.precision_fallback << ")";
  } else {
    out << "fp32";
  }
  out << std::fixed << std::setprecision(1);
  for (size_t s = 0; s < layout.message_bytes.size(); ++s) {
    out << (s == 0 ? ", messages " : " / ") << static_cast<double>(layout.message_bytes[s]) / 1024
        << " KiB";
  }
  if (!layout.message_bytes.empty()) out << " per micro-batch";
  return out.str();
}

// "variable: each micro-batch padded to its longest document, padding masked out of the
// loss", with a warning for a model whose outputs see the padding after a document.
std::string lengthsText(const Config& c, const JobSetup& setup) {
  const SequenceBatches& sequences = *setup.layout().sequences;
  std::string text = toString(sequences.policy());
  switch (sequences.policy()) {
    case SeqLenPolicy::kFixed: text += ": every document padded to "; break;
    case SeqLenPolicy::kBucket: text += ": each micro-batch padded to the first of "; break;
    case SeqLenPolicy::kVariable:
      text += ": each micro-batch padded to its longest document";
      break;
  }
  if (sequences.policy() == SeqLenPolicy::kFixed) text += std::to_string(sequences.maxLength());
  if (sequences.policy() == SeqLenPolicy::kBucket) {
    std::vector<std::string> buckets;
    for (const int64_t b : sequences.buckets()) buckets.push_back(std::to_string(b));
    text += joinText(buckets, ", ") + " it fits";
  }
  text += ", padding masked out of the loss";
  if (setup.model().split.sees_later_tokens && sequences.varies()) {
    text += detail::concat(
        "\n  warning:  the model's outputs at a token change with the tokens after it (attention "
        "that is not causal, without a mask): the padding after each document changes them, so ",
        "the losses depend on how documents are grouped into micro-batches (--pipeline.",
        "microbatches, --train.dp); give the model a padding mask, or use --data.seq_len_policy ",
        "fixed");
  }
  return text;
}

// " (cosine to 0.0001 after 100 warm-up steps)"; "" for a constant rate without warm-up.
std::string lrScheduleText(const TrainConfig& t) {
  std::ostringstream out;
  if (t.lr_schedule != LrSchedule::kConstant) {
    out << " (" << toString(t.lr_schedule) << " to " << t.min_lr;
  } else if (t.warmup_steps > 0) {
    out << " (constant";
  } else {
    return "";
  }
  if (t.warmup_steps > 0) out << " after " << t.warmup_steps << " warm-up steps";
  out << ")";
  return out.str();
}

// The built-in models by the options that built them; a model file by what was captured,
// since the gpt options do not describe it.
std::string modelDescription(const ModelConfig& m, const ModelSplit& split) {
  if (split.model.name == kGptModel) {
    return detail::concat("gpt (layers ", m.layers, ", d_model ", m.d_model, ", seq_len ",
                          m.seq_len, ", vocab ", m.vocab_size, ", tied ",
                          m.tie_embeddings ? "yes" : "no", ")");
  }
  if (split.model.name == kMlpModel) {
    return detail::concat("mlp (layers ", m.layers, ", d_model ", m.d_model, ", seq_len ",
                          m.seq_len, ")");
  }
  const ModelGraph& g = split.graph;
  return detail::concat(split.model.name, " (", g.numTrainableParams(), " parameters in ",
                        g.parameters.size(), " tensors, ", split.partition.units.size(),
                        " units, input", split.example_inputs.size() > 1 ? "s " : " ",
                        inputsText(g.input_names, split.example_inputs), ", ", g.ties.size(),
                        " tied group", g.ties.size() == 1 ? "" : "s", ")");
}

// Where evaluation takes every whole batch of the validation set and samples are left
// over: ", the last 5 samples (less than a batch of 8) not evaluated"; else "".
std::string evalLeftOverText(const Config& c, const EvalModel& eval) {
  const int64_t samples = eval.data->size();  // what planEval counts its batches in
  const int64_t batch = c.train.batch_size;
  const int64_t left = samples - eval.batches * batch;
  if (samples == 0 || eval.batches != samples / batch || left == 0) return "";
  return detail::concat(", the last ", left, left == 1 ? " sample" : " samples",
                        " (less than a batch of ", batch, ") not evaluated");
}

// "2: h0 (ranks 0, 2), h1 (ranks 1, 3); across hosts: stage boundaries 0->1; inside
// them: data-parallel all-reduces", for a job on several hosts.
std::string hostsText(const Topology& t) {
  const std::vector<std::string>& names = mpiHostNames();
  std::ostringstream out;
  out << t.hostCount() << ":";
  for (int h = 0; h < t.hostCount(); ++h) {
    std::vector<std::string> ranks;
    size_t first = 0;
    for (int r = 0; r < t.worldSize(); ++r) {
      if (t.hostOf(r) != h) continue;
      if (ranks.empty()) first = static_cast<size_t>(r);
      ranks.push_back(std::to_string(r));
    }
    out << (h == 0 ? " " : ", ") << (first < names.size() ? names[first] : "?") << " (rank"
        << (ranks.size() > 1 ? "s " : " ") << joinText(ranks, ", ") << ")";
  }
  const HostCrossings crossings = hostCrossings(t);
  std::vector<std::string> across, inside;
  if (!crossings.boundaries.empty()) {
    std::vector<std::string> cuts;
    for (const int s : crossings.boundaries)
      cuts.push_back(std::to_string(s) + "->" + std::to_string(s + 1));
    across.push_back("stage boundaries " + joinText(cuts, ", "));
  } else if (t.numStages() > 1) {
    inside.push_back("the pipeline");
  }
  if (t.dpSize() > 1) {
    (crossings.data_parallel ? across : inside).push_back("data-parallel all-reduces");
  }
  if (t.tpSize() > 1) {
    (crossings.tensor_parallel ? across : inside).push_back("tensor-parallel all-reduces");
  }
  if (!across.empty()) out << "; across hosts: " << joinText(across, ", ");
  if (!inside.empty()) out << "; inside them: " << joinText(inside, ", ");
  return out.str();
}

}  // namespace

void printConfiguration(std::ostream& log, const Config& c, const JobSetup& setup) {
  const JobLayout& layout = setup.layout();
  const Topology& t = layout.topology;
  log << "ppstage train: " << t.worldSize() << " rank" << (t.worldSize() > 1 ? "s" : "") << " = pp "
      << t.ppSize() << " x dp " << t.dpSize();
  if (t.tpSize() > 1) log << " x tp " << t.tpSize();
  log << ", " << t.numStages() << " stage" << (t.numStages() > 1 ? "s" : "") << " ("
      << t.stagesPerRank() << " per rank, " << toString(t.placement()) << " placement"
      << (t.rankOrder() != RankOrder::kReplicaMajor
              ? std::string(", ranks ") + toString(t.rankOrder())
              : std::string())
      << "), " << layout.threads << " thread" << (layout.threads > 1 ? "s" : "") << " per rank\n"
      << "  model     " << modelDescription(c.model, setup.model().split) << "\n"
      << "  schedule  " << layout.schedule.name << ", " << layout.batch.microbatches
      << " micro-batches of " << layout.batch.microbatch_size << " (batch " << c.train.batch_size
      << "), simulated bubble " << std::fixed << std::setprecision(3)
      << layout.schedule.simulation.bubble_fraction << "\n"
      << std::defaultfloat << std::setprecision(6) << "  compile   " << toString(c.compile.mode)
      << "\n"
      << "  train     " << c.train.steps << " steps, " << toString(c.train.optimizer) << " lr "
      << c.train.lr << lrScheduleText(c.train) << " weight_decay " << c.train.weight_decay
      << ", grad_clip " << c.train.grad_clip << ", loss " << toString(layout.loss)
      << lossChoiceText(c, setup) << ", seed " << c.train.seed << "\n"
      << "  data      " << (setup.data() != nullptr ? setup.data()->describe() : "?") << "\n"
      << "  precision " << precisionText(c, setup) << "\n";
  if (setup.eval() != nullptr && setup.eval()->data != nullptr) {
    log << "  eval      every " << c.eval.every << " steps, " << setup.eval()->batches
        << " batches of " << setup.eval()->data->describe() << evalLeftOverText(c, *setup.eval())
        << "\n";
  }
  if (t.hostCount() > 1) log << "  hosts     " << hostsText(t) << "\n";
  if (layout.sequences) log << "  lengths   " << lengthsText(c, setup) << "\n";
  if (c.train.recompute != RecomputePolicy::kNone) {
    for (const StageRecompute& r : recomputePerStage(c, setup.model().split)) {
      log << "  recompute stage " << r.stage << ": " << r.policy << ", " << r.blocks.size()
          << " block" << (r.blocks.size() == 1 ? "" : "s");
      for (size_t i = 0; i < r.blocks.size(); ++i) log << (i == 0 ? " (" : ", ") << r.blocks[i];
      log << (r.blocks.empty() ? "" : ")") << "\n";
    }
  }
  for (const TpStageReport& report : setup.model().tp_reports) {
    log << "  tp        stage " << report.stage << ": " << summarizeRegions(report) << "\n";
    for (const std::string& region : describeRegions(report))
      log << "            " << region << "\n";
  }
  log << "\n";
}

void printStep(std::ostream& log, const Config& c, const JobLayout& layout, int64_t step,
               const StepResult& r) {
  log << "step " << std::setw(4) << step + 1 << "/" << c.train.steps << std::fixed;
  if (std::isfinite(r.epoch)) log << "  epoch " << std::setprecision(2) << r.epoch;
  log << "  loss " << std::setprecision(4) << r.loss;
  if (layout.classifies) log << "  accuracy " << r.accuracy;
  log << std::defaultfloat << std::setprecision(3) << "  lr " << r.lr << std::fixed << "  time "
      << r.seconds << " s  " << (layout.token_inputs ? "tokens/s " : "samples/s ")
      << std::setprecision(0) << static_cast<double>(r.tokens) / r.seconds << "  bubble "
      << std::setprecision(3) << r.bubble << "  grad_norm " << std::setprecision(3) << r.grad_norm;
  if (countingAllocatorInstalled()) {  // the largest rank's tensor memory in this step
    const auto& allocated = r.reduced.peak_allocated_mb;
    const auto& activations = r.reduced.peak_activation_mb;
    log << "  tensors MB " << std::setprecision(1)
        << *std::max_element(allocated.begin(), allocated.end()) << " (activations "
        << *std::max_element(activations.begin(), activations.end()) << ")";
  }
  if (c.compile.mode != CompileMode::kNone) {
    log << "  graphs " << std::setprecision(0) << r.reduced.graphs_compiled << "  respec "
        << r.reduced.respecializations;
  }
  log << std::defaultfloat << std::setprecision(6) << std::endl;
}

}  // namespace ppstage
