// See include/ppstage/train/captured_run.h.
#include "ppstage/train/captured_run.h"

#include <string>
#include <vector>

#include "ppstage/data/data_files.h"
#include "ppstage/data/sequence_batches.h"

namespace ppstage {
namespace {

// The example inputs of a data file: its first samples of each field on offer (cycling when
// the data set is smaller than the batch asked for), bound to forward's arguments at capture.
InputSpec dataInputSpec(const std::shared_ptr<const Dataset>& data, const DataRoles& roles,
                        const DataConfig& config) {
  const SampleShape& sample = data->fields().at(roles.offered_fields.at(0)).sample;
  InputSpec spec;
  spec.dtype = sample.dtype;
  spec.shape = {1};
  spec.shape.insert(spec.shape.end(), sample.shape.begin(), sample.shape.end());
  spec.token_bound = sample.token_bound;
  for (size_t field : roles.offered_fields) spec.names.push_back(data->fields().at(field).name);
  spec.source = "the first samples of --data.path '" + config.path + "'";
  const std::vector<size_t> fields = roles.offered_fields;
  spec.samples = [data, fields](int64_t batch) {
    std::vector<int64_t> indices;
    for (int64_t i = 0; i < batch; ++i) indices.push_back(i % data->size());
    if (data->length(0) == 0) return stackFields(*data, fields, indices);
    std::vector<at::Tensor> padded;  // documents: at the longest a sample may be
    for (const size_t f : fields) {
      padded.push_back(padField(*data, f, indices, data->fields().at(f).sample.shape.at(0), 0));
    }
    return padded;
  };
  spec.value_range = [data, fields](size_t i) {
    return data->valueRange(fields.at(i), std::numeric_limits<int64_t>::min());
  };
  return spec;
}

}  // namespace

LossKind runLossKind(const Config& config, const DataFile* file, const InputSpec& model_input) {
  return resolveLossKind(config.train.loss,
                         file != nullptr ? file->data->fields().at(file->roles.target).sample.dtype
                                         : model_input.dtype);
}

std::optional<DataFile> openDataFileOf(const Config& config) {
  if (isModelShaped(config.data)) return std::nullopt;
  DataFile file;
  file.data = openDataFile(config.data, config.model.seq_len);
  file.roles = dataRolesOf(*file.data, config.data, config.train.loss == LossKind::kModel);
  file.input = dataInputSpec(file.data, file.roles, config.data);
  return file;
}

CapturedRun captureRun(const Config& config) {
  CapturedRun run;
  run.file = openDataFileOf(config);
  run.model = captureForSplit(config, run.dataInput());
  run.loss = runLossKind(config, run.file ? &*run.file : nullptr, run.model.model.input);
  return run;
}

}  // namespace ppstage
