// Ranks as threads of one process, for tests of code above the communication layer.
#pragma once

#include <chrono>
#include <exception>
#include <functional>
#include <thread>
#include <vector>

#include "ppstage/comm/in_order_communicator.h"
#include "ppstage/comm/local_communicator.h"

namespace ppstage::test {

// Runs body(rank, comm) on `size` threads, each with `group`'s communicator of its rank;
// rethrows the first failure.
template <typename Group>
void runRanksOf(const Group& group, int size, const std::function<void(int, Communicator&)>& body) {
  std::vector<std::exception_ptr> errors(static_cast<size_t>(size));
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r) {
    threads.emplace_back([&, r] {
      try {
        auto comm = group.communicator(r);
        body(r, *comm);
      } catch (...) {
        errors[static_cast<size_t>(r)] = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
}

// The same on a LocalGroup: messages match by tag, as under MPI.
inline void runRanks(int size, const std::function<void(int, Communicator&)>& body,
                     std::chrono::milliseconds timeout = std::chrono::milliseconds(20000)) {
  runRanksOf(LocalGroup(size, CommOptions{timeout}), size, body);
}

// The same on an InOrderGroup: messages match in posting order, as under NCCL (Note
// [NCCL's posting order]).
inline void runRanksInOrder(int size, const std::function<void(int, Communicator&)>& body,
                            std::chrono::milliseconds timeout = std::chrono::milliseconds(20000)) {
  runRanksOf(InOrderGroup(size, CommOptions{timeout}), size, body);
}

}  // namespace ppstage::test
