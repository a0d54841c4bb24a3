// See include/ppstage/comm/peer_channels.h.
#include "ppstage/comm/peer_channels.h"

#include <algorithm>
#include <cstdlib>
#include <set>

#include "ppstage/core/error.h"

namespace ppstage {
namespace {

// `routes` in rounds: no rank is in two routes of one round.
std::vector<std::vector<Route>> roundsOf(std::vector<Route> routes) {
  std::sort(routes.begin(), routes.end());
  routes.erase(std::unique(routes.begin(), routes.end()), routes.end());
  std::vector<std::vector<Route>> rounds;
  while (!routes.empty()) {
    std::set<int> busy;
    std::vector<Route> round, later;
    for (const Route& route : routes) {
      if (busy.count(route.first) > 0 || busy.count(route.second) > 0) {
        later.push_back(route);
        continue;
      }
      busy.insert({route.first, route.second});
      round.push_back(route);
    }
    rounds.push_back(std::move(round));
    routes = std::move(later);
  }
  return rounds;
}

// A channel's Work: a failure names the route in the parent's ranks, since the channel's
// own (its sender 0, its receiver 1) mean nothing to the reader.
class ChannelWork final : public Work {
 public:
  ChannelWork(std::shared_ptr<Work> work, const Route& route)
      : work_(std::move(work)), route_(route) {}
  bool isCompleted() override { return work_->isCompleted(); }
  void wait(std::chrono::milliseconds timeout) override {
    try {
      work_->wait(timeout);
    } catch (const CommError& e) {
      throw CommError(detail::concat(e.what(), " [on the channel from rank ", route_.first,
                                     " (its rank 0) to rank ", route_.second, " (its rank 1)]"));
    }
  }

 private:
  std::shared_ptr<Work> work_;
  Route route_;
};

}  // namespace

PeerChannels::PeerChannels(Communicator& parent)
    : Communicator(parent.options()), parent_(parent) {}

std::unique_ptr<PeerChannels> PeerChannels::create(Communicator& parent,
                                                   std::vector<Route> routes) {
  std::unique_ptr<PeerChannels> channels(new PeerChannels(parent));
  const int me = parent.rank();
  for (const std::vector<Route>& round : roundsOf(std::move(routes))) {
    // A route's two ranks share its index as color; every other rank is alone.
    int color = static_cast<int>(round.size()) + me;
    int key = 0;
    const Route* mine = nullptr;
    for (size_t i = 0; i < round.size(); ++i) {
      const auto& [from, to] = round[i];
      PPSTAGE_INTERNAL_ASSERT(
          from != to && from >= 0 && to >= 0 && from < parent.size() && to < parent.size(),
          "route ", from, " -> ", to, " in a communicator of ", parent.size());
      if (me != from && me != to) continue;
      color = static_cast<int>(i);
      key = me == from ? 0 : 1;
      mine = &round[i];
    }
    std::unique_ptr<Communicator> sub = parent.split(color, key);
    if (mine != nullptr) channels->channels_[*mine] = std::move(sub);
  }
  return channels;
}

Communicator& PeerChannels::channel(const Route& route) const {
  const auto it = channels_.find(route);
  PPSTAGE_INTERNAL_ASSERT(it != channels_.end(), "no channel from rank ", route.first, " to rank ",
                          route.second);
  return *it->second;
}

std::shared_ptr<Work> PeerChannels::send(const at::Tensor& tensor, int dst, MessageTag tag) {
  const Route route{rank(), dst};
  return std::make_shared<ChannelWork>(channel(route).send(tensor, 1, tag), route);
}

std::shared_ptr<Work> PeerChannels::recv(const at::Tensor& tensor, int src, MessageTag tag) {
  const Route route{src, rank()};
  return std::make_shared<ChannelWork>(channel(route).recv(tensor, 0, tag), route);
}

void PeerChannels::allReduceSum(const std::vector<at::Tensor>& tensors) {
  parent_.allReduceSum(tensors);
}

void PeerChannels::broadcast(std::string& bytes, int root) { parent_.broadcast(bytes, root); }

void PeerChannels::barrier() { parent_.barrier(); }

std::unique_ptr<Communicator> PeerChannels::split(int color, int key) {
  return parent_.split(color, key);
}

void PeerChannels::abort(int exit_code) {
  parent_.abort(exit_code);
  std::abort();  // not reached: every Communicator::abort ends the process or throws
}

}  // namespace ppstage
