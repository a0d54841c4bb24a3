// The embedding tables a model looks its integer inputs up in: how many rows each has, so
// that data can be checked against the model's vocabulary before a step fails inside
// aten::embedding ("index out of range in self").
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "ppstage/graph/model_graph.h"

namespace ppstage {

struct EmbeddingTable {
  size_t input = 0;  // the data input (graph input) whose values index the table
  std::string path;  // the table's parameter path ("tok_emb.weight"), or the module's
  int64_t rows = 0;  // valid ids: 0 .. rows - 1
};

// Each aten::embedding of `graph` whose indices are a data input's values, reached through
// ops that keep values as they are (view, reshape, slice, to, ...); by input.
std::vector<EmbeddingTable> embeddingTablesOf(const ModelGraph& graph);

// Throws ppstage::Error when ids from `ids.first` to `ids.second`, of the data field `name`,
// would index outside `table`: "<source>: the ids of 'input_ids' go up to 300, but they
// index the model's embedding 'wte.weight' of 256 rows (ids 0 to 255)<hint>".
void checkIdsFit(const EmbeddingTable& table, std::pair<int64_t, int64_t> ids,
                 const std::string& name, const std::string& source, const std::string& hint = "");

}  // namespace ppstage
