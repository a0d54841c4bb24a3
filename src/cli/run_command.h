// How every ppstage command ends: the one place that decides the process's fate. Library
// code only throws.
#pragma once

#include <functional>

namespace ppstage::cli {

// Runs `body` and returns its exit code. When it throws:
//   - a JobError (every rank of the job has it, comm/agreement.h): the one rank that
//     reports it prints it, and every rank returns its exit code, leaving MPI normally;
//   - anything else: one line `ppstage: error: <message>` on stderr (`[rank r] ` before the
//     message under MPI), exit code 2 for ppstage::Error (bad input), 1 otherwise; under
//     MPI this rank then ends the whole job (MPI_Abort), so no other rank waits on it.
// main() runs every command through it; a command that uses MPI runs its work through it
// again while MPI is up, before unwinding would reach MPI_Finalize with ranks still waiting.
int runCommand(const std::function<int()>& body);

}  // namespace ppstage::cli
