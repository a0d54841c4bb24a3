// What the planner (plan/cost_profile.h) charges for communication, measured on the job's
// own ranks: a message between two ranks and an all-reduce over several, each as a line
// through two sizes (seconds = latency + bytes / bandwidth; an all-reduce's latency that
// of 2 ranks, LinkCosts), inside a host and between hosts, and the step's all-reduce over
// every rank (LinkCosts::step_reduce_s).
//
// Note [Probing the links of a job]
// Ranks on one host share its memory, and ranks on two hosts the network between them, so
// one pair stands for the pairs of its kind: the probe ping-pongs the first two ranks of
// every host that has two, and the first rank of host 0 with the first of every other host
// (2 hosts - 1 pairs, not one per two hosts: 64 hosts would take minutes), one pair at a
// time while the others wait. Every pair a layout can use is inside a host or between two,
// and each kind's figure is its slowest pair's. The all-reduces run as a
// run's do, every group at once: over each host's ranks (inside), and over the ranks with
// the same place on their hosts (between); on one host, over all the ranks. Each line is
// the slowest of its kind (the least bandwidth, the most latency): the ranks of a step wait
// for the slowest. For the same reason an all-reduce's time at one size is the median over
// repetitions of its group's slowest rank, not a rank's own. The larger size of each line is what
// moves in about 0.1 s at the bandwidth the smaller one shows, from 1 to 32 MiB: 32 MiB over 200
// Mbit/s would take 1.3 s a trip.
#pragma once

#include <vector>

namespace ppstage {

class Communicator;

// seconds = latency_s + bytes / bytes_per_s (an all-reduce's: LinkCosts).
struct LinkLine {
  double latency_s = 0;
  double bytes_per_s = 0;  // 0: not measured
  bool measured() const { return bytes_per_s > 0; }
};

// One pair the probe measured: one message between two ranks (half a ping-pong's round
// trip), and the hosts they are on.
struct ProbedPair {
  int first_rank = 0, second_rank = 0;
  int first_host = 0, second_host = 0;
  LinkLine message;
};

struct LinkCosts {
  // Inside a host: one message between two ranks; a sum over n ranks of `bytes` each, as a
  // ring moves it: (n - 1) x latency + 2 (n - 1) / n x bytes / bandwidth (the latency of
  // 2 ranks; the ring's 2 (n - 1) steps each pay a message's).
  LinkLine message;
  LinkLine all_reduce;
  // Between hosts, the same two; not measured on one host.
  LinkLine host_message;
  LinkLine host_all_reduce;
  std::vector<ProbedPair> pairs;  // every pair measured, in the order measured
  // The median over repetitions of the slowest rank's all-reduce over every rank, started
  // together, of what a training step's all-reduce of its losses and norms moves
  // (train/step_reduce.h: 14 doubles and 6 per rank): what joins the ranks at the end of
  // each step. The lines above, fitted at 64 KiB and more, overstate so small a sum where
  // TCP's slow start lifts their latency.
  double step_reduce_s = 0;
};

// Collective over `world`, which has at least two ranks, on hosts `host_of_rank` (one per
// world rank, numbered from 0; empty: one host) (Note [Probing the links of a job]).
// Blocking; throws CommError when a peer does not answer in time. Every rank returns the
// same figures.
LinkCosts measureLinks(Communicator& world, const std::vector<int>& host_of_rank = {});

}  // namespace ppstage
