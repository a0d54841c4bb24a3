// See include/ppstage/observe/live_metrics.h.
#include "ppstage/observe/live_metrics.h"

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "ppstage/core/error.h"
#include "ppstage/observe/tensorboard_events.h"

namespace ppstage {
namespace {

double unixSeconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// One JSON object a line, flushed as written: `tail -f` and a reader that polls see each
// step when it ends.
class JsonLinesSink : public LiveMetricsSink {
 public:
  JsonLinesSink(const std::string& path, bool append)
      : path_(path), out_(path, append ? std::ios::app : std::ios::trunc) {
    PPSTAGE_CHECK(out_.good(), "cannot write --output.metrics_jsonl '", path,
                  "': ", std::strerror(errno));
  }
  void step(const LiveStep& s) override { writeLine(liveStepJson(s, unixSeconds())); }
  void eval(const LiveEval& e) override { writeLine(liveEvalJson(e, unixSeconds())); }

 private:
  void writeLine(const std::string& line) {
    out_ << line << '\n' << std::flush;
    PPSTAGE_CHECK(out_.good(), "cannot write --output.metrics_jsonl '", path_, "'");
  }

  std::string path_;
  std::ofstream out_;
};

// TensorBoard's scalars: train/... at each step, eval/... at each evaluation.
class TensorBoardSink : public LiveMetricsSink {
 public:
  explicit TensorBoardSink(const std::string& dir) : writer_(dir) {}
  void step(const LiveStep& s) override {
    std::vector<std::pair<std::string, double>> scalars = {
        {"train/loss", s.loss},
        {"train/lr", s.lr},
        {"train/grad_norm", s.grad_norm},
        {s.token_rate ? "train/tokens_per_s" : "train/samples_per_s", s.rate},
        {"train/step_seconds", s.seconds},
        {"train/bubble", s.bubble}};
    if (!std::isnan(s.accuracy)) scalars.emplace_back("train/accuracy", s.accuracy);
    if (std::isfinite(s.epoch)) scalars.emplace_back("train/epoch", s.epoch);
    writer_.write(s.step, scalars);
  }
  void eval(const LiveEval& e) override {
    std::vector<std::pair<std::string, double>> scalars = {{"eval/loss", e.loss}};
    if (!std::isnan(e.accuracy)) scalars.emplace_back("eval/accuracy", e.accuracy);
    writer_.write(e.step, scalars);
  }

 private:
  TensorBoardWriter writer_;
};

}  // namespace

std::string liveStepJson(const LiveStep& s, double unix_time) {
  nlohmann::ordered_json line = {{"kind", "step"},           {"step", s.step},
                                 {"loss", s.loss},           {"lr", s.lr},
                                 {"grad_norm", s.grad_norm}, {"seconds", s.seconds}};
  line[s.token_rate ? "tokens_per_s" : "samples_per_s"] = s.rate;
  line["bubble"] = s.bubble;
  if (!std::isnan(s.accuracy)) line["accuracy"] = s.accuracy;
  if (std::isfinite(s.epoch)) line["epoch"] = s.epoch;
  line["finite"] = s.finite;
  line["time"] = unix_time;
  return line.dump();  // a NaN or infinite loss is written as null
}

std::string liveEvalJson(const LiveEval& e, double unix_time) {
  nlohmann::ordered_json line = {{"kind", "eval"}, {"step", e.step}, {"loss", e.loss}};
  if (!std::isnan(e.accuracy)) line["accuracy"] = e.accuracy;
  line["seconds"] = e.seconds;
  line["time"] = unix_time;
  return line.dump();
}

std::vector<std::unique_ptr<LiveMetricsSink>> openLiveMetrics(const OutputConfig& output,
                                                              bool resumed) {
  std::vector<std::unique_ptr<LiveMetricsSink>> sinks;
  if (!output.metrics_jsonl.empty()) {
    sinks.push_back(std::make_unique<JsonLinesSink>(output.metrics_jsonl, resumed));
  }
  if (!output.tensorboard.empty()) {
    sinks.push_back(std::make_unique<TensorBoardSink>(output.tensorboard));
  }
  return sinks;
}

}  // namespace ppstage
