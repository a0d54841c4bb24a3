// See include/ppstage/schedule/early_receives.h.
#include "ppstage/schedule/early_receives.h"

#include <algorithm>
#include <vector>

#include "ppstage/core/error.h"

namespace ppstage {
namespace {

// For every (stage, micro-batch) of `list`, the index of its last action: where the
// buffers its RECVs took are given back.
std::map<std::pair<int, int>, size_t> lastActions(const ActionList& list) {
  std::map<std::pair<int, int>, size_t> last;
  for (size_t i = 0; i < list.size(); ++i) last[{list[i].stage, list[i].microbatch}] = i;
  return last;
}

}  // namespace

std::map<ReceivePool, int> receiveBuffersHeld(const ActionList& list) {
  const auto last = lastActions(list);
  std::map<ReceivePool, int> held, peak;
  std::multimap<size_t, ReceivePool> releases;  // after action i, these pools get one back
  for (size_t i = 0; i < list.size(); ++i) {
    const Action& a = list[i];
    if (a.isReceive()) {
      const ReceivePool pool{a.stage, a.kind};
      peak[pool] = std::max(peak[pool], ++held[pool]);
      releases.emplace(last.at({a.stage, a.microbatch}), pool);
    }
    const auto [begin, end] = releases.equal_range(i);
    for (auto it = begin; it != end; ++it) --held[it->second];
  }
  return peak;
}

ActionList postReceivesEarly(const ActionList& list, const ReceivePosting& posting) {
  PPSTAGE_INTERNAL_ASSERT(posting.extra_buffers >= 0, "extra_buffers ", posting.extra_buffers);
  std::map<ReceivePool, int> capacity = receiveBuffersHeld(list);
  for (auto& [pool, buffers] : capacity) buffers += posting.extra_buffers;

  // The list without its RECVs; a RECV goes into a gap, gap g being just before others[g].
  // send_floor[g]: the gap after the last SEND before gap g (how far a RECV may move when
  // communication keeps its order).
  ActionList others;
  std::vector<std::pair<size_t, Action>> receives;  // (its gap as lowered, the RECV)
  std::vector<size_t> send_floor{0};
  for (const Action& a : list) {
    if (a.isReceive()) {
      receives.emplace_back(others.size(), a);
      continue;
    }
    others.push_back(a);
    send_floor.push_back(a.isCompute() ? send_floor.back() : others.size());
  }
  if (receives.empty()) return list;

  const auto last = lastActions(others);
  // held[pool][g]: that pool's buffers taken while others[g] runs, by the RECVs placed so far.
  std::map<ReceivePool, std::vector<int>> held;
  std::vector<size_t> placed(receives.size());
  size_t lower = 0;  // the RECVs keep their order
  for (size_t r = 0; r < receives.size(); ++r) {
    const auto& [gap, recv] = receives[r];
    const ReceivePool pool{recv.stage, recv.kind};
    std::vector<int>& taken = held[pool];
    if (taken.empty()) taken.assign(others.size(), 0);
    const size_t floor = std::max(lower, posting.keep_communication_order ? send_floor[gap] : 0);
    size_t g = gap;
    while (g > floor && taken[g - 1] < capacity.at(pool)) --g;
    const size_t release = last.at({recv.stage, recv.microbatch});
    for (size_t j = g; j <= release; ++j) ++taken[j];
    placed[r] = lower = g;
  }

  ActionList out;
  out.reserve(list.size());
  size_t r = 0;
  for (size_t g = 0; g <= others.size(); ++g) {
    for (; r < receives.size() && placed[r] == g; ++r) out.push_back(receives[r].second);
    if (g < others.size()) out.push_back(others[g]);
  }
  return out;
}

}  // namespace ppstage
