// LocalCommunicator: several ranks as threads of one process, with the semantics of
// communicator.h. For unit tests of everything above the communication layer, and a model
// of MPI with no MPI at all.
//
//   LocalGroup group(4);
//   // in thread r: auto comm = group.communicator(r); comm->send(...);
//
// Sends copy the tensor into the receiver's mailbox and complete at once; receives match
// (source, tag) in posting order.
#pragma once

#include <memory>

#include "ppstage/comm/communicator.h"

namespace ppstage {

class LocalGroup {
 public:
  explicit LocalGroup(int size, CommOptions options = {});
  // The communicator of `rank`; each rank's is used by one thread at a time.
  std::unique_ptr<Communicator> communicator(int rank) const;

  struct State;  // mailboxes and collective rounds, shared by the group's communicators

 private:
  std::shared_ptr<State> state_;
};

}  // namespace ppstage
