// The job's data against its model: what a model-shaped data set must give, the checks that the
// data fits the model's loss, the validation set, and documents.
// Internal to train/: job_setup.cpp assembles the setup from these.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ppstage/data/data_files.h"
#include "ppstage/train/job_setup.h"

namespace ppstage {

// One sample of the model's first output, from the plan's shapes: (B, ...) -> (...), or
// rows of logits (B*T, V) -> (T, V).
SampleShape outputSample(const BoundaryTensor& output, int64_t batch);

// What a model-shaped data set must give: the model's input samples and, for the loss,
// targets shaped like one sample of its first output.
DataRequest dataRequestOf(const ModelSplit& split, LossKind loss, const Config& config);

// Throws ppstage::Error when a bounded `data` holds fewer samples than one global batch.
void checkHoldsOneBatch(const Dataset& data, int64_t batch_size);

// checkTargetsFit for `data`'s target field, over its values where the data set knows them.
void checkTargetsOf(const Dataset& data, const JobLayout& layout, const SampleShape& output,
                    int64_t ignore_index);

// Throws ppstage::Error when a field of `data` fed to the model holds an id outside an
// embedding table it indexes (checkIdsFit); `source` names the data. Captures check the
// training data (captureForSplit); this checks a validation set.
void checkIdsFitEmbeddings(const Dataset& data, const JobLayout& layout, const ModelGraph& graph,
                           const ModelConfig& model, const std::string& source);

// The validation set, read as the training data is, whose fields match the training data's.
std::shared_ptr<const Dataset> openValidationSet(const Config& config, const JobLayout& layout,
                                                 const ModelSplit& split, const Dataset& train);

// --train.loss model: the labels come from a data file and feed one of forward's
// arguments, and the first output is a scalar.
void checkModelComputesLoss(bool data_file, const DataRoles& roles, const ModelSplit& split);

// The documents of `data` as --data.seq_len_policy pads them. Throws ppstage::Error for
// data that has no documents (npy, tensors, idx: samples of one shape).
std::shared_ptr<const SequenceBatches> sequencesOf(const Dataset& data, const Config& config);

}  // namespace ppstage
