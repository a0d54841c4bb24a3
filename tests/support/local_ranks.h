// Ranks as threads of one process, for tests of code above the communication layer.
#pragma once

#include <chrono>
#include <exception>
#include <functional>
#include <thread>
#include <vector>

#include "ppstage/comm/local_communicator.h"

namespace ppstage::test {

// Runs body(rank, comm) on `size` threads of one LocalGroup; rethrows the first failure.
inline void runRanks(int size, const std::function<void(int, Communicator&)>& body,
                     std::chrono::milliseconds timeout = std::chrono::milliseconds(20000)) {
  LocalGroup group(size, CommOptions{timeout});
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

}  // namespace ppstage::test
