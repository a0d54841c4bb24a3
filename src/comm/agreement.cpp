// See include/ppstage/comm/agreement.h.
#include "ppstage/comm/agreement.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include "ppstage/comm/communicator.h"

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
  comm.broadcast(message, failed);
  const std::string line = message.substr(0, message.find('\n'));
  throw JobError(failed == 0 ? line : "[rank " + std::to_string(failed) + "] " + line,
                 static_cast<int>(all[failed]), comm.rank() == 0);
}

}  // namespace ppstage
