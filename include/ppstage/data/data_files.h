// Data files that describe their own samples, so that the model's example input can come
// from them (no shape flags): the tokens of a flat token file, the arrays of NumPy .npy
// files, the tensors of a torch.save file, the images and labels of MNIST's IDX files.
//
// Formats (--data.format; auto decides by magic number, then by extension):
//   tokens   uint16 or uint32 tokens (--data.token_dtype), or llm.c's layout: a header of
//            256 int32 (magic 20240520 with version 1: uint16; magic 20240801 with
//            version 7: uint32; then the token count) before them. Memory-mapped; windows
//            of seq_len + 1 tokens give input_ids and labels (dataset.h). Extensions .bin,
//            .tokens.
//   npy      a folder of .npy files, one named tensor each (input_ids.npy, labels.npy: the
//            names are the file names), or one x.npy with --data.targets y.npy. Little-endian
//            numeric dtypes in C order; samples along the first dimension. Memory-mapped
//            (unsigned 16- and 32-bit arrays are widened to int32 and int64 in memory).
//   tensors  a file of torch.save({"input_ids": ..., "labels": ...}): named tensors with
//            the same first dimension, in the dict's order. Extensions .pt, .pth.
//   idx      an IDX images file (MNIST, Fashion-MNIST; gzipped or not) and its labels
//            (--data.targets, default: the name with images-idx3 made labels-idx1):
//            3-D image files give images (1, H, W) float32 in [0, 1] (uint8 / 255, as
//            torchvision's ToTensor); 1-D files labels int64; others float32 as they are.
//   text     bytes as byte-level tokens (dataset.h's openDataset; shaped by the model).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "ppstage/config/config.h"
#include "ppstage/data/dataset.h"

namespace ppstage {

// The format of --data.path: `config.format`, or for auto what its magic number and then
// its extension say (text when neither does). "" and "synthetic" are kText. Throws
// ppstage::Error when the path cannot be read.
DataFormat resolveDataFormat(const DataConfig& config);

// Whether `config`'s samples are shaped by the model (the embedded text, synthetic data, a
// text file) rather than by the data file (openDataFile).
bool isModelShaped(const DataConfig& config);

// Opens the data file of `config` (not model-shaped); token windows are `seq_len` long.
// Throws ppstage::Error, naming the file, for a missing or empty file, a token file whose
// size is not a multiple of its dtype, a wrong magic number, an .npy with an unsupported
// dtype or in Fortran order, and tensors whose first dimensions differ.
std::unique_ptr<Dataset> openDataFile(const DataConfig& config, int64_t seq_len);

}  // namespace ppstage
