// See job_data.h.
#include "job_data.h"

#include <algorithm>
#include <limits>

#include "ppstage/core/error.h"
#include "ppstage/core/text.h"
#include "ppstage/data/data_files.h"
#include "ppstage/graph/embedding_tables.h"
#include "ppstage/models/model_source.h"

namespace ppstage {

SampleShape outputSample(const BoundaryTensor& output, int64_t batch) {
  const TensorMeta& meta = output.meta;
  SampleShape sample{meta.dtype, {}, 0};
  if (meta.sizes.empty()) return sample;
  const bool batch_first = !meta.dims.empty() && meta.dims[0] == AffineDim{1, 0};
  if (batch_first) {
    sample.shape.assign(meta.sizes.begin() + 1, meta.sizes.end());
  } else {
    const int64_t last = meta.sizes.back();
    sample.shape = {meta.numel() / std::max<int64_t>(1, batch * last), last};
  }
  return sample;
}

DataRequest dataRequestOf(const ModelSplit& split, LossKind loss, const Config& config) {
  DataRequest request;
  request.input.dtype = split.model.input.dtype;
  request.input.shape.assign(split.model.input.shape.begin() + 1, split.model.input.shape.end());
  request.input.token_bound = split.model.input.token_bound;
  request.output = outputSample(split.stages.back().outputs.at(0), config.train.batch_size);
  request.loss = loss;
  request.seed = config.train.seed;
  request.builtin_model = config.model.builtin();
  return request;
}

void checkHoldsOneBatch(const Dataset& data, int64_t batch_size) {
  PPSTAGE_CHECK(data.size() == 0 || data.size() >= batch_size, data.describe(),
                " has fewer samples than one batch (--train.batch_size ", batch_size, ")");
}

void checkTargetsOf(const Dataset& data, const JobLayout& layout, const SampleShape& output,
                    int64_t ignore_index) {
  if (layout.loss == LossKind::kModel) return;  // the model compares them itself
  const size_t target = layout.roles.target;
  const auto range =
      layout.loss == LossKind::kCrossEntropy ? data.valueRange(target, ignore_index) : std::nullopt;
  checkTargetsFit(data.fields().at(target), output, layout.loss, ignore_index, range);
}

void checkIdsFitEmbeddings(const Dataset& data, const JobLayout& layout, const ModelGraph& graph,
                           const ModelConfig& model, const std::string& source) {
  for (const EmbeddingTable& table : embeddingTablesOf(graph)) {
    const size_t field = layout.roles.inputs.at(table.input);
    const auto ids = data.valueRange(field, std::numeric_limits<int64_t>::min());
    if (ids) {
      checkIdsFit(table, *ids, data.fields().at(field).name, source,
                  vocabSizeAdvice(model, ids->second));
    }
  }
}

std::shared_ptr<const Dataset> openValidationSet(const Config& config, const JobLayout& layout,
                                                 const ModelSplit& split, const Dataset& train) {
  DataConfig val = config.data;
  val.path = config.data.val_path;
  val.targets.clear();  // an .npy validation set is a folder of the same names
  std::shared_ptr<const Dataset> data;
  if (isModelShaped(val)) {
    data = openDataset(val, dataRequestOf(split, layout.loss, config));
  } else {
    data = openDataFile(val, config.model.seq_len);
  }
  const std::string fields = fieldsText(data->fields());
  PPSTAGE_CHECK(fields == fieldsText(train.fields()), "--data.val_path '", val.path, "' gives ",
                fields, "; the training data gives ", fieldsText(train.fields()));
  checkHoldsOneBatch(*data, config.train.batch_size);
  checkIdsFitEmbeddings(*data, layout, split.graph, config.model,
                        "--data.val_path '" + val.path + "'");
  checkTargetsOf(*data, layout,
                 outputSample(split.stages.back().outputs.at(0), config.train.batch_size),
                 config.train.ignore_index);
  return data;
}

void checkModelComputesLoss(bool data_file, const DataRoles& roles, const ModelSplit& split) {
  PPSTAGE_CHECK(data_file, "--train.loss model passes the labels to the model: give a data ",
                "file with them (--data.path of a tokens, npy, tensors or idx file; text and ",
                "synthetic data have none to pass)");
  const auto fed = std::find(roles.inputs.begin(), roles.inputs.end(), roles.target);
  PPSTAGE_CHECK(
      fed != roles.inputs.end(), "--train.loss model passes the labels to the model, ",
      "but they feed none of forward's arguments (fed: ", joinText(split.graph.input_names, ", "),
      "); add them to --model.inputs (ARG=", "FIELD)");
  const TensorMeta& loss = split.stages.back().outputs.at(0).meta;
  checkModelLoss(loss.dtype, loss.sizes);
}

std::shared_ptr<const SequenceBatches> sequencesOf(const Dataset& data, const Config& config) {
  PPSTAGE_CHECK(data.size() > 0 && data.length(0) > 0,
                "--data.documents and --data.seq_len_policy ", toString(config.data.seq_len_policy),
                " need text or a token file; ", data.describe(), " has samples of one shape");
  const int64_t max_length = data.fields().at(0).sample.shape.at(0);
  return std::make_shared<SequenceBatches>(SequenceBatches::of(data, config.data, max_length));
}

}  // namespace ppstage
