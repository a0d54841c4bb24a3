// See include/ppstage/checkpoint/manifest.h.
#include "ppstage/checkpoint/manifest.h"

#include <nlohmann/json.hpp>

#include "ppstage/core/error.h"
#include "ppstage/core/json_integer.h"

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
                               {"steps", m.steps},
                               {"lr_schedule", m.lr_schedule},
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
    m.step = jsonIntegerAt(json, "step", source);
    m.time = json.at("time").get<std::string>();
    m.model = json.at("model").get<std::string>();
    m.model_hash = json.at("model_hash").get<std::string>();
    m.optimizer = json.at("optimizer").get<std::string>();
    m.seed = jsonIntegerAt(json, "seed", source);
    m.batch_size = jsonIntegerAt(json, "batch_size", source);
    m.steps = jsonIntegerOr<int64_t>(json, "steps", 0, source);  // older checkpoints: none
    m.lr_schedule = json.value("lr_schedule", "");
    m.samples_seen = jsonIntegerAt(json, "samples_seen", source);
    PPSTAGE_CHECK(json.at("random_keys").is_object(), source, ": 'random_keys' is not an object");
    for (const auto& [name, key] : json.at("random_keys").items()) {
      m.random_keys[name] = jsonInteger(key, "random_keys." + name, source);
    }
    const nlohmann::json& l = json.at("layout");
    m.layout.pp = jsonIntegerAt<int>(l, "pp", source);
    m.layout.dp = jsonIntegerAt<int>(l, "dp", source);
    m.layout.tp = jsonIntegerOr<int>(l, "tp", 1, source);  // older checkpoints: none
    m.layout.stages = jsonIntegerAt<int>(l, "stages", source);
    m.layout.stages_per_rank = jsonIntegerAt<int>(l, "stages_per_rank", source);
    m.layout.microbatches = jsonIntegerAt<int>(l, "microbatches", source);
    m.layout.schedule = l.at("schedule").get<std::string>();
    m.layout.compile_mode = l.at("compile_mode").get<std::string>();
    m.layout.stage_modules = l.at("stage_modules").get<std::vector<std::vector<std::string>>>();
    for (const nlohmann::json& t : json.at("tensors")) {
      std::vector<int64_t> shape;
      for (const nlohmann::json& size : t.at("shape"))
        shape.push_back(jsonInteger(size, "shape", source));
      m.tensors.push_back({t.at("path").get<std::string>(), std::move(shape),
                           t.at("dtype").get<std::string>(), t.at("file").get<std::string>(),
                           t.at("parameter").get<bool>(),
                           t.at("optimizer_file").get<std::string>()});
    }
    for (const nlohmann::json& f : json.at("files")) {
      m.files.push_back({f.at("name").get<std::string>(), jsonIntegerAt(f, "bytes", source),
                         f.at("sha256").get<std::string>()});
    }
  } catch (const nlohmann::json::exception& e) {
    PPSTAGE_FAIL(source, " is not a valid checkpoint manifest: ", e.what());
  }
  return m;
}

}  // namespace ppstage
