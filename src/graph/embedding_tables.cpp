// See include/ppstage/graph/embedding_tables.h.
#include "ppstage/graph/embedding_tables.h"

#include <torch/csrc/jit/ir/ir.h>

#include <unordered_set>

#include "ppstage/core/error.h"

namespace ppstage {
namespace {

using torch::jit::Node;
using torch::jit::Value;

// Ops whose first operand's values reach their output unchanged (rearranged, selected or
// cast between integer types): ids stay ids.
bool keepsValues(const Node* node) {
  static const std::unordered_set<std::string> kOps = {
      "aten::view",       "aten::reshape", "aten::flatten", "aten::unsqueeze", "aten::squeeze",
      "aten::contiguous", "aten::to",      "aten::slice",   "aten::select",    "aten::narrow",
      "aten::clone",      "aten::expand",  "aten::permute", "aten::transpose", "aten::t",
      "aten::detach",     "aten::long",    "aten::int",     "aten::repeat",    "aten::type_as"};
  return kOps.count(node->kind().toQualString()) > 0;
}

// The prim::If whose branch `node` ends (its prim::Return), or null.
const Node* ifReturning(const Node* node) {
  if (node->kind() != c10::prim::Return) return nullptr;
  const Node* owner = node->owningBlock()->owningNode();
  return owner != nullptr && owner->kind() == c10::prim::If ? owner : nullptr;
}

// Rows of `weight`: from the parameter it is, else from its complete type.
int64_t rowsOf(const ModelGraph& graph, const Value* weight, std::string& path) {
  for (size_t p = 0; p < graph.parameters.size(); ++p) {
    if (graph.parameterInput(p) != weight) continue;
    const at::Tensor& value = graph.parameters[p].value;
    path = graph.parameters[p].path;
    return value.defined() && value.dim() >= 1 ? value.size(0) : 0;
  }
  const auto type = weight->type()->cast<c10::TensorType>();
  if (!type) return 0;
  const auto sizes = type->sizes().concrete_sizes();
  return sizes && !sizes->empty() ? sizes->front() : 0;
}

}  // namespace

std::vector<EmbeddingTable> embeddingTablesOf(const ModelGraph& graph) {
  std::vector<EmbeddingTable> tables;
  for (size_t input = 0; input < graph.numInputs(); ++input) {
    std::vector<const Value*> pending = {graph.graph->inputs()[input]};
    std::unordered_set<const Value*> seen;
    while (!pending.empty()) {
      const Value* value = pending.back();
      pending.pop_back();
      if (!seen.insert(value).second) continue;
      for (const torch::jit::Use& use : value->uses()) {
        const Node* user = use.user;
        if (user->kind() == c10::Symbol::fromQualString("aten::embedding") && use.offset == 1) {
          EmbeddingTable table{input, graph.modulePathOf(user), 0};
          table.rows = rowsOf(graph, user->input(0), table.path);
          if (table.rows > 0) tables.push_back(table);
        } else if (use.offset == 0 && keepsValues(user)) {
          pending.push_back(user->output());
        } else if (const Node* branch = ifReturning(user)) {
          // F.embedding's `if max_norm is not None: input = input.contiguous()`
          pending.push_back(branch->output(use.offset));
        }
      }
    }
  }
  return tables;
}

void checkIdsFit(const EmbeddingTable& table, std::pair<int64_t, int64_t> ids,
                 const std::string& name, const std::string& source, const std::string& hint) {
  const std::string rows = detail::concat("the model's embedding '", table.path, "' of ",
                                          table.rows, " rows (ids 0 to ", table.rows - 1, ")");
  PPSTAGE_CHECK(ids.first >= 0, source, ": the ids of '", name, "' go down to ", ids.first,
                ", but they index ", rows);
  PPSTAGE_CHECK(ids.second < table.rows, source, ": the ids of '", name, "' go up to ", ids.second,
                ", but they index ", rows, hint);
}

}  // namespace ppstage
