// See include/ppstage/comm/agreement.h.
#include "ppstage/comm/agreement.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cstring>

#include "ppstage/comm/communicator.h"
#include "ppstage/comm/failure_channel.h"
#include "ppstage/comm/failure_reports.h"

namespace ppstage {

Failure failureOf(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const Error& e) {
    return {e.what(), 2};
  } catch (const c10::Error& e) {
    return {e.what_without_backtrace(), 1};
  } catch (const std::exception& e) {
    return {e.what(), 1};
  } catch (...) {
    return {"an exception that is not a std::exception", 1};
  }
}

void runAgreed(Communicator& comm, const std::function<void()>& fn) {
  std::string message;
  int64_t code = 0;
  try {
    fn();
  } catch (const JobError&) {
    throw;  // already agreed
  } catch (const PeerFailedError&) {
    throw;  // another rank failed: rank 0 sums up (Note [Failure reports])
  } catch (...) {
    Failure failure = failureOf(std::current_exception());
    message = std::move(failure.message);
    code = failure.exit_code;
  }
  at::Tensor codes = at::zeros({comm.size()}, at::kLong);
  codes[comm.rank()] = code;
  comm.allReduceSum({codes});
  const auto* all = codes.data_ptr<int64_t>();
  int failed = -1;
  for (int r = 0; r < comm.size() && failed < 0; ++r) {
    if (all[r] != 0) failed = r;
  }
  if (failed < 0) return;
  const auto firstLine = [](const std::string& text) { return text.substr(0, text.find('\n')); };
  const std::vector<std::string> messages = allGatherStrings(comm, firstLine(message));
  std::vector<FailureReport> reports;  // no times: the first is the lowest rank
  for (int r = 0; r < comm.size(); ++r) {
    if (all[r] != 0) reports.push_back({r, static_cast<int>(all[r]), 0, messages[r]});
  }
  const int exit_code = static_cast<int>(all[failed]);
  const bool same = std::all_of(reports.begin(), reports.end(),
                                [&](const auto& r) { return r.message == messages[failed]; });
  if (same) {  // one line says it all: a bad option every rank parsed, or one rank's failure
    const std::string& line = messages[failed];
    throw JobError(failed == 0 ? line : rankPrefixed(failed, line), exit_code, comm.rank() == 0);
  }
  // Different failures: each failed rank prints its own, rank 0 the summary after its own.
  JobError error(rankPrefixed(comm.rank(), messages[comm.rank()]), exit_code, code != 0);
  if (comm.rank() == 0) error.setSummary(failureSummary(reports, comm.size()));
  throw error;
}

std::vector<std::string> allGatherStrings(Communicator& comm, const std::string& mine) {
  at::Tensor lengths = at::zeros({comm.size()}, at::kLong);
  lengths[comm.rank()] = static_cast<int64_t>(mine.size());
  comm.allReduceSum({lengths});
  const auto* length = lengths.data_ptr<int64_t>();
  int64_t total = 0, offset = 0;
  for (int r = 0; r < comm.size(); ++r) {
    if (r == comm.rank()) offset = total;
    total += length[r];
  }
  at::Tensor bytes = at::zeros({total}, at::kLong);  // one byte per element: sums stay exact
  auto* byte = bytes.data_ptr<int64_t>();
  for (size_t i = 0; i < mine.size(); ++i)
    byte[offset + static_cast<int64_t>(i)] = static_cast<unsigned char>(mine[i]);
  comm.allReduceSum({bytes});
  std::vector<std::string> all;
  int64_t at_byte = 0;
  for (int r = 0; r < comm.size(); ++r) {
    std::string text(static_cast<size_t>(length[r]), '\0');
    for (int64_t i = 0; i < length[r]; ++i)
      text[static_cast<size_t>(i)] = static_cast<char>(byte[at_byte + i]);
    at_byte += length[r];
    all.push_back(std::move(text));
  }
  return all;
}

std::vector<std::string> gatherStrings(Communicator& comm, const std::string& mine, int root) {
  const MessageTag length_tag = controlTag(ControlChannel::kGatherLength);
  const MessageTag bytes_tag = controlTag(ControlChannel::kGatherBytes);
  if (comm.rank() != root) {
    at::Tensor length = at::full({1}, static_cast<int64_t>(mine.size()), at::kLong);
    comm.sendSync(length, root, length_tag);
    if (!mine.empty()) {
      at::Tensor bytes = at::empty({static_cast<int64_t>(mine.size())}, at::kByte);
      std::memcpy(bytes.data_ptr(), mine.data(), mine.size());
      comm.sendSync(bytes, root, bytes_tag);
    }
    return {};
  }
  std::vector<std::string> all(static_cast<size_t>(comm.size()));
  for (int r = 0; r < comm.size(); ++r) {
    if (r == root) {
      all[static_cast<size_t>(r)] = mine;
      continue;
    }
    at::Tensor length = at::zeros({1}, at::kLong);
    comm.recvSync(length, r, length_tag);
    const int64_t size = length.item<int64_t>();
    if (size == 0) continue;
    at::Tensor bytes = at::empty({size}, at::kByte);
    comm.recvSync(bytes, r, bytes_tag);
    all[static_cast<size_t>(r)].assign(static_cast<const char*>(bytes.data_ptr()),
                                       static_cast<size_t>(size));
  }
  return all;
}

}  // namespace ppstage
