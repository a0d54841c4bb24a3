// See mpi_job.h.
#include "mpi_job.h"

#include <c10/util/Exception.h>

#include "ppstage/comm/agreement.h"
#include "ppstage/comm/mpi_session.h"
#include "ppstage/core/error.h"

namespace ppstage::cli {

int runMpiJob(const std::function<int()>& body) {
  try {
    return body();
  } catch (const JobError&) {
    throw;
  } catch (const Error& e) {
    failJob(e.what(), 2);
  } catch (const c10::Error& e) {
    failJob(e.what_without_backtrace(), 1);
  } catch (const std::exception& e) {
    failJob(e.what(), 1);
  }
}

}  // namespace ppstage::cli
