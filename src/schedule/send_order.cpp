// See include/ppstage/schedule/send_order.h.
#include "ppstage/schedule/send_order.h"

#include <algorithm>
#include <map>
#include <set>

#include "ppstage/core/error.h"

namespace ppstage {
namespace {

// The RECV that receives what `send` sends, on the rank of its peer stage.
Action receiveOf(const Action& send) {
  return send.kind == ActionKind::kSendForward
             ? Action{ActionKind::kRecvForward, send.stage + 1, send.microbatch}
             : Action{ActionKind::kRecvBackward, send.stage - 1, send.microbatch};
}

// The stage whose SEND a RECV receives from.
int senderStage(const Action& recv) {
  return recv.kind == ActionKind::kRecvForward ? recv.stage - 1 : recv.stage + 1;
}

// [(sender, receiver)]: the receiver's RECVs, in the order the sender posts their SENDs.
std::map<std::pair<int, int>, std::vector<Action>> sentAlongRoutes(
    const ScheduleRequest& request, const std::vector<ActionList>& lowered) {
  std::map<std::pair<int, int>, std::vector<Action>> sent;
  for (int a = 0; a < static_cast<int>(lowered.size()); ++a) {
    for (const Action& action : lowered[a]) {
      if (action.kind != ActionKind::kSendForward && action.kind != ActionKind::kSendBackward) {
        continue;
      }
      const Action recv = receiveOf(action);
      sent[{a, request.rank_of_stage.at(recv.stage)}].push_back(recv);
    }
  }
  return sent;
}

// Appends to `out` the RECVs of `order` (one sender's messages to this rank, in its SEND
// order) from `next` up to and including `recv`, marking each `posted`; `next` moves past.
void receiveUpTo(const Action& recv, const std::vector<Action>& order, size_t& next,
                 ActionList& out, std::set<Action>& posted) {
  const auto it = std::find(order.begin() + static_cast<std::ptrdiff_t>(next), order.end(), recv);
  PPSTAGE_INTERNAL_ASSERT(it != order.end(), toString(recv), " has no SEND on its sender");
  const auto end = it + 1;
  for (auto taken = order.begin() + static_cast<std::ptrdiff_t>(next); taken != end; ++taken) {
    out.push_back(*taken);
    posted.insert(*taken);
  }
  next = static_cast<size_t>(end - order.begin());
}

}  // namespace

std::vector<std::pair<int, int>> sendRoutes(const ScheduleRequest& request,
                                            const std::vector<ActionList>& lowered) {
  std::vector<std::pair<int, int>> routes;
  for (const auto& [route, receives] : sentAlongRoutes(request, lowered)) routes.push_back(route);
  return routes;
}

std::vector<ActionList> receiveInSendOrder(const ScheduleRequest& request,
                                           const std::vector<ActionList>& lowered) {
  const std::map<std::pair<int, int>, std::vector<Action>> sent = sentAlongRoutes(request, lowered);
  std::vector<ActionList> out(lowered.size());
  for (int b = 0; b < static_cast<int>(lowered.size()); ++b) {
    std::map<int, size_t> next;  // per sender: its next message in `sent`
    std::set<Action> posted;
    for (const Action& action : lowered[b]) {
      if (!action.isReceive()) {
        out[b].push_back(action);
        continue;
      }
      if (posted.count(action) > 0) continue;  // taken along by an earlier RECV
      const int a = request.rank_of_stage.at(senderStage(action));
      const auto order = sent.find({a, b});
      PPSTAGE_INTERNAL_ASSERT(order != sent.end(), toString(action), " on rank ", b, " but rank ",
                              a, " sends it nothing");
      receiveUpTo(action, order->second, next[a], out[b], posted);
    }
  }
  return out;
}

}  // namespace ppstage
