// The link probe over ranks on hosts (comm/link_probe.h, Note [Probing the links of a
// job]), ranks as threads: which pairs it measures (two ranks of each host with two, host
// 0's first rank with each other host's), that every rank gets the same figures, and that
// the lines between hosts exist only where there are several hosts; and that an
// all-reduce's time is its slowest rank's, repetition by repetition.
#include <gtest/gtest.h>

#include <mutex>
#include <tuple>
#include <vector>

#include "ppstage/comm/link_probe.h"
#include "ppstage/core/statistics.h"
#include "support/local_ranks.h"

namespace ppstage {
namespace {

using Pair = std::tuple<int, int, int, int>;  // ranks, hosts

// measureLinks on every rank of `hosts`; every rank's figures must be rank 0's.
LinkCosts probed(const std::vector<int>& hosts, int ranks) {
  std::vector<LinkCosts> costs(static_cast<size_t>(ranks));
  test::runRanks(ranks, [&](int rank, Communicator& world) {
    costs[static_cast<size_t>(rank)] = measureLinks(world, hosts);
  });
  for (const LinkCosts& c : costs) {
    EXPECT_EQ(c.message.latency_s, costs[0].message.latency_s);
    EXPECT_EQ(c.message.bytes_per_s, costs[0].message.bytes_per_s);
    EXPECT_EQ(c.all_reduce.bytes_per_s, costs[0].all_reduce.bytes_per_s);
    EXPECT_EQ(c.all_reduce.latency_s, costs[0].all_reduce.latency_s);
    EXPECT_EQ(c.host_all_reduce.latency_s, costs[0].host_all_reduce.latency_s);
    EXPECT_EQ(c.step_reduce_s, costs[0].step_reduce_s);
    EXPECT_EQ(c.host_message.bytes_per_s, costs[0].host_message.bytes_per_s);
    EXPECT_EQ(c.host_all_reduce.bytes_per_s, costs[0].host_all_reduce.bytes_per_s);
    EXPECT_EQ(c.pairs.size(), costs[0].pairs.size());
  }
  return costs[0];
}

std::vector<Pair> pairsOf(const LinkCosts& costs) {
  std::vector<Pair> pairs;
  for (const ProbedPair& p : costs.pairs) {
    pairs.emplace_back(p.first_rank, p.second_rank, p.first_host, p.second_host);
    EXPECT_TRUE(p.message.measured());
  }
  return pairs;
}

TEST(LinkProbe, TwoHostsOfTwoRanks) {
  const LinkCosts costs = probed({0, 0, 1, 1}, 4);
  EXPECT_EQ(pairsOf(costs), (std::vector<Pair>{{0, 1, 0, 0}, {2, 3, 1, 1}, {0, 2, 0, 1}}));
  EXPECT_TRUE(costs.message.measured());
  EXPECT_TRUE(costs.all_reduce.measured());
  EXPECT_TRUE(costs.host_message.measured());
  EXPECT_TRUE(costs.host_all_reduce.measured());
}

// By node (0 1 0 1), and hosts of unequal ranks: host 1 has one rank, so no pair inside it.
TEST(LinkProbe, HostsInAnyOrderAndOfUnequalRanks) {
  EXPECT_EQ(pairsOf(probed({0, 1, 0, 1}, 4)),
            (std::vector<Pair>{{0, 2, 0, 0}, {1, 3, 1, 1}, {0, 1, 0, 1}}));
  const LinkCosts uneven = probed({0, 0, 0, 1}, 4);
  EXPECT_EQ(pairsOf(uneven), (std::vector<Pair>{{0, 1, 0, 0}, {0, 3, 0, 1}}));
  EXPECT_TRUE(uneven.host_all_reduce.measured());
}

// One host: one pair, the all-reduce over all the ranks, nothing between hosts.
TEST(LinkProbe, OneHostHasNoLinksBetweenHosts) {
  const LinkCosts costs = probed({}, 3);
  EXPECT_EQ(pairsOf(costs), (std::vector<Pair>{{0, 1, 0, 0}}));
  EXPECT_TRUE(costs.all_reduce.measured());
  EXPECT_FALSE(costs.host_message.measured());
  EXPECT_FALSE(costs.host_all_reduce.measured());
}

// One rank a host: nothing moves inside one, and the lines between hosts stand in.
TEST(LinkProbe, OneRankAHostChargesTheLinksBetweenThem) {
  const LinkCosts costs = probed({0, 1}, 2);
  EXPECT_EQ(pairsOf(costs), (std::vector<Pair>{{0, 1, 0, 1}}));
  EXPECT_EQ(costs.message.bytes_per_s, costs.host_message.bytes_per_s);
  EXPECT_EQ(costs.all_reduce.bytes_per_s, costs.host_all_reduce.bytes_per_s);
}

// Each rank slow in a different repetition: a step, which waits for every rank, waits 5 s
// every time, where every rank's own median is 1 s.
TEST(LinkProbe, AnAllReduceTakesItsSlowestRankEachTime) {
  const std::vector<std::vector<double>> times = {{1, 5, 1}, {5, 1, 1}, {1, 1, 5}};
  for (const std::vector<double>& rank : times) EXPECT_DOUBLE_EQ(median(rank), 1.0);
  EXPECT_DOUBLE_EQ(medianOfSlowest(times), 5.0);
  EXPECT_DOUBLE_EQ(medianOfSlowest({{0.2, 0.4}, {0.3, 0.1}}), 0.35);
  EXPECT_DOUBLE_EQ(medianOfSlowest({}), 0.0);
}

}  // namespace
}  // namespace ppstage
