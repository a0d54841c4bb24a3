// A tensor-parallel group as the graphs of a rank see it: the ranks holding the shards of
// one stage, the two collectives the tensor-parallel pass puts in their graphs, and the
// dropout of a shard (ppstage::tp_dropout: the whole keyed mask drawn, this rank's shard of
// it kept).
//
//   %y = ppstage::tp_copy(%x, %group)     forward: y = x;             backward: sum of dy
//   %y = ppstage::tp_reduce(%x, %group)   forward: y = sum of x;      backward: dx = dy
//
// (sums over the group's ranks). tp_copy enters a sharded region: each rank's share of the
// region differentiates only its part of x's uses, and the sum is x's gradient. tp_reduce
// leaves one: the row-parallel products of the ranks are partial sums. Both are ops with an
// eager autograd node of their own (no symbolic gradient), so every compile mode runs them
// between its differentiated regions, and the I/W split places their backward as any eager
// op's. `group` is an int constant naming a TpGroup registered in this process (several
// in-process ranks, under the local communicator, each register their own).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>

#include "ppstage/split/tensor_shard.h"

namespace ppstage {

class Communicator;
class TraceRecorder;

class TpGroup {
 public:
  // A group of `size` ranks of which this is `rank`; registered, so that graphs can name
  // it (id()) before its communicator exists.
  TpGroup(int rank, int size);
  ~TpGroup();
  TpGroup(const TpGroup&) = delete;
  TpGroup& operator=(const TpGroup&) = delete;

  int id() const { return id_; }
  int rank() const { return rank_; }
  int size() const { return size_; }

  // The communicator of the group's ranks (Communicator::split of the world with
  // Topology::tensorParallelColor); collectives before it is attached are our bug.
  void attach(std::unique_ptr<Communicator> comm);
  // Where each collective is recorded as a TraceKind::kTensorParallel event; null: nowhere.
  void setTrace(TraceRecorder* trace) { trace_ = trace; }

  // In place: `tensor` (contiguous) becomes the sum over the group. Timed and traced.
  void allReduceSum(at::Tensor& tensor);

  // Seconds spent in allReduceSum, and calls, since the group was made.
  double seconds() const { return seconds_; }
  int64_t calls() const { return calls_; }

 private:
  int id_;
  int rank_;
  int size_;
  std::unique_ptr<Communicator> comm_;
  TraceRecorder* trace_ = nullptr;
  double seconds_ = 0;
  int64_t calls_ = 0;
};

// The whole tensor of which `piece` is this rank's `shard`, on every rank of `group`
// (collective: each places its piece in zeros, and the group sums); `piece` itself when
// not sharded.
at::Tensor gatherShards(const at::Tensor& piece, const TensorShard& shard, TpGroup& group);

// The registered group `id` names; throws c10::Error (the graph's op fails) when none does.
TpGroup& tpGroupOf(int64_t id);

// Registers ppstage::tp_copy, tp_reduce and tp_dropout with the dispatcher (once per process);
// the pass calls it before putting them in a graph.
void registerTpOps();

}  // namespace ppstage
