// Which of a job's traffic crosses between hosts (core/topology.h, hostCrossings): the
// layouts of docs/multi-host.md, 2 hosts of 2 ranks, as mpirun places them by slot (each
// host's slots filled with consecutive ranks) and by node (consecutive ranks on
// consecutive hosts).
#include <gtest/gtest.h>

#include <vector>

#include "ppstage/core/error.h"
#include "ppstage/core/topology.h"

namespace ppstage {
namespace {

const std::vector<int> kBySlot = {0, 0, 1, 1};
const std::vector<int> kByNode = {0, 1, 0, 1};

TEST(HostCrossings, OneHostCrossesNothing) {
  const Topology job = Topology::forJob(4, 2, 2, 1);
  EXPECT_EQ(job.hostCount(), 1);
  const HostCrossings c = hostCrossings(job);
  EXPECT_TRUE(c.boundaries.empty());
  EXPECT_FALSE(c.data_parallel);
  EXPECT_FALSE(c.tensor_parallel);
  EXPECT_TRUE(c.pipeline_ranks_apart.empty());
  EXPECT_FALSE(c.apart(0, 1));
}

// pp 2 x dp 2: ranks 0, 1 are replica 0's stages 0 and 1, ranks 2, 3 replica 1's.
TEST(HostCrossings, ByNodeThePipelineCrossesAndTheAllReducesStay) {
  const Topology job = Topology::forJob(4, 2, 2, 1).withHosts(kByNode);
  EXPECT_EQ(job.hostCount(), 2);
  EXPECT_EQ(job.hostOf(3), 1);
  const HostCrossings c = hostCrossings(job);
  EXPECT_EQ(c.boundaries, std::vector<int>{0});
  EXPECT_FALSE(c.data_parallel);
  EXPECT_TRUE(c.apart(0, 1));  // a tie between the stages crosses too
  EXPECT_TRUE(c.apart(1, 0));
  EXPECT_FALSE(c.apart(0, 0));
}

TEST(HostCrossings, BySlotTheAllReducesCrossAndThePipelineStays) {
  const HostCrossings c = hostCrossings(Topology::forJob(4, 2, 2, 1).withHosts(kBySlot));
  EXPECT_TRUE(c.boundaries.empty());
  EXPECT_TRUE(c.data_parallel);
  EXPECT_FALSE(c.apart(0, 1));
}

// pp 2 x tp 2 by slot: each tensor-parallel pair on one host, the pipeline across them; by
// node the other way round.
TEST(HostCrossings, TensorParallelPairsStayInsideAHostBySlot) {
  const HostCrossings slot =
      hostCrossings(Topology::forJob(4, 1, 2, 1, Placement::kLoop, 2).withHosts(kBySlot));
  EXPECT_EQ(slot.boundaries, std::vector<int>{0});
  EXPECT_FALSE(slot.tensor_parallel);
  const HostCrossings node =
      hostCrossings(Topology::forJob(4, 1, 2, 1, Placement::kLoop, 2).withHosts(kByNode));
  EXPECT_TRUE(node.boundaries.empty());
  EXPECT_TRUE(node.tensor_parallel);
}

// An interleaved pipeline of 4 stages on 2 ranks, one per host: every boundary crosses.
TEST(HostCrossings, EveryBoundaryOfAnInterleavedPipelineAcrossTwoHosts) {
  const HostCrossings c = hostCrossings(Topology::forJob(2, 1, 4, 2).withHosts({0, 1}));
  EXPECT_EQ(c.boundaries, (std::vector<int>{0, 1, 2}));
}

TEST(HostCrossings, HostsForAnotherWorldAreRefused) {
  EXPECT_THROW(Topology::forJob(4, 2, 2, 1).withHosts({0, 1}), Error);
}

// --pipeline.rank_order pp-dp-tp: world rank = (pp_rank x dp + dp_rank) x tp + tp_rank; the
// rank arithmetic inverts it, and the colors group a stage's replicas (dp), a replica's
// stages (pipeline) and adjacent ranks (tp) as in the default order.
TEST(HostCrossings, PipelineMajorRanksAreAStagesReplicasSideBySide) {
  const Topology job = Topology::forJob(8, 2, 2, 1, Placement::kLoop, 2, RankOrder::kPipelineMajor);
  EXPECT_EQ(job.rankOrder(), RankOrder::kPipelineMajor);
  for (int r = 0; r < 8; ++r) {
    EXPECT_EQ(job.worldRank(job.ppRankOf(r), job.dpRankOf(r), job.tpRankOf(r)), r);
  }
  EXPECT_EQ(job.worldRank(0, 1, 0), 2);  // stage 0 of replica 1 beside replica 0's
  EXPECT_EQ(job.worldRank(1, 0, 1), 5);
  const Topology rank2 = job.atRank(2), rank0 = job.atRank(0), rank4 = job.atRank(4);
  EXPECT_EQ(rank2.dataParallelColor(), rank0.dataParallelColor());
  EXPECT_NE(rank2.pipelineColor(), rank0.pipelineColor());
  EXPECT_EQ(rank4.pipelineColor(), rank0.pipelineColor());
  EXPECT_EQ(rank0.nextRank(0), 4);
  EXPECT_EQ(job.atRank(1).tensorParallelColor(), rank0.tensorParallelColor());
}

// By slot, pp-dp-tp puts each stage's replicas on one host: the pipeline crosses and the
// all-reduces stay, as dp-pp-tp by node does.
TEST(HostCrossings, PipelineMajorBySlotThePipelineCrossesAndTheAllReducesStay) {
  const HostCrossings c =
      hostCrossings(Topology::forJob(4, 2, 2, 1, Placement::kLoop, 1, RankOrder::kPipelineMajor)
                        .withHosts(kBySlot));
  EXPECT_EQ(c.boundaries, std::vector<int>{0});
  EXPECT_FALSE(c.data_parallel);
  const HostCrossings by_node =
      hostCrossings(Topology::forJob(4, 2, 2, 1, Placement::kLoop, 1, RankOrder::kPipelineMajor)
                        .withHosts(kByNode));
  EXPECT_TRUE(by_node.boundaries.empty());
  EXPECT_TRUE(by_node.data_parallel);
}

}  // namespace
}  // namespace ppstage
