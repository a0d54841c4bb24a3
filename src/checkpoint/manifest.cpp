// See include/ppstage/checkpoint/manifest.h.
#include "ppstage/checkpoint/manifest.h"

#include <nlohmann/json.hpp>

#include "ppstage/core/error.h"

namespace ppstage {

std::string manifestToJson(const Manifest& m) {
  nlohmann::json tensors = nlohmann::json::array(), files = nlohmann::json::array();
  for (const SavedTensor& t : m.tensors) {
    tensors.push_back({{"path", t.path},
                       {"shape", t.shape},
                       {"dtype", t.dtype},
                       {"file", t.file},
                       {"parameter", t.parameter},
                       {"optimizer_file", t.optimizer_file}});
  }
  for (const CheckpointFile& f : m.files) {
    files.push_back({{"name", f.name}, {"bytes", f.bytes}, {"sha256", f.sha256}});
  }
  const SavedLayout& l = m.layout;
  const nlohmann::json layout = {{"pp", l.pp},
                                 {"dp", l.dp},
                                 {"tp", l.tp},
                                 {"stages", l.stages},
                                 {"stages_per_rank", l.stages_per_rank},
                                 {"microbatches", l.microbatches},
                                 {"schedule", l.schedule},
                                 {"compile_mode", l.compile_mode},
                                 {"stage_modules", l.stage_modules}};
  const nlohmann::json json = {{"format", Manifest::kFormat},
                               {"step", m.step},
                               {"time", m.time},
                               {"model", m.model},
                               {"model_hash", m.model_hash},
                               {"optimizer", m.optimizer},
                               {"seed", m.seed},
                               {"batch_size", m.batch_size},
                               {"samples_seen", m.samples_seen},
                               {"random_keys", m.random_keys},
                               {"layout", layout},
                               {"tensors", tensors},
                               {"files", files}};
  return json.dump(1) + "\n";
}

Manifest manifestFromJson(const std::string& text, const std::string& source) {
  Manifest m;
  try {
    const nlohmann::json json = nlohmann::json::parse(text);
    PPSTAGE_CHECK(json.at("format").get<std::string>() == Manifest::kFormat, source, " is not a ",
                  Manifest::kFormat, " manifest");
    m.step = json.at("step").get<int64_t>();
    m.time = json.at("time").get<std::string>();
    m.model = json.at("model").get<std::string>();
    m.model_hash = json.at("model_hash").get<std::string>();
    m.optimizer = json.at("optimizer").get<std::string>();
    m.seed = json.at("seed").get<int64_t>();
    m.batch_size = json.at("batch_size").get<int64_t>();
    m.samples_seen = json.at("samples_seen").get<int64_t>();
    m.random_keys = json.at("random_keys").get<std::map<std::string, int64_t>>();
    const nlohmann::json& l = json.at("layout");
    m.layout.pp = l.at("pp").get<int>();
    m.layout.dp = l.at("dp").get<int>();
    m.layout.tp = l.value("tp", 1);  // checkpoints from before tensor parallelism
    m.layout.stages = l.at("stages").get<int>();
    m.layout.stages_per_rank = l.at("stages_per_rank").get<int>();
    m.layout.microbatches = l.at("microbatches").get<int>();
    m.layout.schedule = l.at("schedule").get<std::string>();
    m.layout.compile_mode = l.at("compile_mode").get<std::string>();
    m.layout.stage_modules = l.at("stage_modules").get<std::vector<std::vector<std::string>>>();
    for (const nlohmann::json& t : json.at("tensors")) {
      m.tensors.push_back(
          {t.at("path").get<std::string>(), t.at("shape").get<std::vector<int64_t>>(),
           t.at("dtype").get<std::string>(), t.at("file").get<std::string>(),
           t.at("parameter").get<bool>(), t.at("optimizer_file").get<std::string>()});
    }
    for (const nlohmann::json& f : json.at("files")) {
      m.files.push_back({f.at("name").get<std::string>(), f.at("bytes").get<int64_t>(),
                         f.at("sha256").get<std::string>()});
    }
  } catch (const nlohmann::json::exception& e) {
    PPSTAGE_FAIL(source, " is not a valid checkpoint manifest: ", e.what());
  }
  return m;
}

}  // namespace ppstage
