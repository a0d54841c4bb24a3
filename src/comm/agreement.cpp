// See include/ppstage/comm/agreement.h.
#include "ppstage/comm/agreement.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include "ppstage/comm/communicator.h"

namespace ppstage {

namespace {
constexpr int64_t kBadInput = 2;
constexpr int64_t kFailure = 1;
}  // namespace

void runAgreed(Communicator& comm, const std::function<void()>& fn) {
  std::string message;
  int64_t code = 0;
  try {
    fn();
  } catch (const JobError&) {
    throw;  // already agreed
  } catch (const Error& e) {
    message = e.what();
    code = kBadInput;
  } catch (const c10::Error& e) {
    message = e.what_without_backtrace();
    code = kFailure;
  } catch (const std::exception& e) {
    message = e.what();
    code = kFailure;
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
