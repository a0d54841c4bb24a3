// See include/ppstage/comm/mpi_communicator.h.
//
// Tensors travel as raw bytes (MPI_BYTE), so every dtype round-trips bitwise; non-contiguous
// tensors are packed into a contiguous copy on send and unpacked after the receive
// completes. CUDA tensors go through host memory (Open MPI from Debian is not CUDA-aware):
// a send copies to a pinned host buffer first (waiting for the kernels that write the
// tensor), a receive lands in one and is copied to the device when it completes, an
// all-reduce sums a host copy of each bucket. Slow, but how several ranks share one GPU
// (NCCL refuses that). All-reduce sums flat buckets of one dtype each around a ring of
// point-to-point messages (ring_all_reduce.h). Every wait polls MPI_Test under the handle's mutex
// until done or the timeout, so a dead peer ends in a CommError instead of a hang.
#include "ppstage/comm/mpi_communicator.h"

#include <ATen/ATen.h>
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>

#include "flat_buffers.h"
#include "ppstage/comm/failure_channel.h"
#include "ppstage/comm/mpi_session.h"
#include "ppstage/comm/ring_all_reduce.h"
#include "ppstage/core/all_reduce_buckets.h"
#include "ppstage/core/error.h"
#include "ppstage/core/interrupt.h"

namespace ppstage {

struct MpiCommunicator::Handle {
  MPI_Comm comm = MPI_COMM_NULL;
  std::mutex mutex;              // See Note [MPI thread level]
  std::vector<int> world_rank;   // of each rank of `comm`: errors name ranks as mpirun does
  bool reports_to_here = false;  // this process is world rank 0: its waits look for reports
  ~Handle() {
    if (comm != MPI_COMM_NULL && mpiActive()) MPI_Comm_free(&comm);
  }
};

namespace {

using Clock = std::chrono::steady_clock;

std::string mpiErrorText(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  return std::string(text, length);
}

void checkMpi(int code, const char* call) {
  if (code != MPI_SUCCESS) {
    throw CommError(
        detail::concat(mpiRankName(mpiWorldRank()), ": ", call, " failed: ", mpiErrorText(code)));
  }
}

// Note [A wait cut short names its peer]
// When a host dies, mpirun learns it from its daemon and ends the job within about 2 s,
// before --comm.timeout_s: the ranks left get SIGTERM, and SIGKILL a second later, while
// they wait for a rank that is gone, and the timeout's error, which names that rank and
// its host, never comes. So a wait still going kStalledWait (0.3 s) into it once a stop is
// asked says what it waits for, on stderr at once, as the timeout would: "ppstage: [rank 0
// (host h0)] asked to stop 1.0 s into a wait: rank 0 (host h0) waiting to receive gradient
// 0 of stage 1, micro-batch 2 from rank 1 (host h1); is that rank alive?". On hosts made of
// namespaces the SIGTERM came 1.0 s after the host died, the rank waiting since then: it
// says so at once (4 of 4 runs). A collective's wait says so too, and goes on (it cannot
// be cancelled). After a Ctrl-C every rank abandons at once, and their waits end within
// milliseconds.
//
// A wait `waited` long when a stop was asked: says what it waits for, once (`said`), where
// that was kStalledWait or more, and abandons it (throws StepInterrupted) where it may be
// (a Work's, inside a step); a collective's wait goes on.
template <typename Describe>
void stopWaiting(Clock::duration waited, const Describe& what, bool may_interrupt, bool& said) {
  constexpr auto kStalledWait = std::chrono::milliseconds(300);
  if (!said && waited >= kStalledWait) {
    said = true;
    const std::string rank = mpiRankName(mpiWorldRank());
    std::fprintf(stderr,
                 "ppstage: [%s] asked to stop %.1f s into a wait: %s %s; is that rank alive?\n",
                 rank.c_str(), std::chrono::duration<double>(waited).count(), rank.c_str(),
                 std::string(what()).c_str());
    std::fflush(stderr);
  }
  if (may_interrupt) throwIfInterrupted();
}

// The sleep between two tests of a wait that has lasted `waited` (waitRequest).
std::chrono::microseconds napAfter(Clock::duration waited, bool moves_data) {
  constexpr auto kNap = std::chrono::microseconds(50);
  constexpr auto kLongestNap = std::chrono::microseconds(1000);
  if (moves_data) return kNap;
  return std::clamp(std::chrono::duration_cast<std::chrono::microseconds>(waited) / 1000, kNap,
                    kLongestNap);
}

// Polls `request` until it completes or `timeout` passes. Spins for the first kBusy, then
// yields between tests until kSpin: MPI moves a large message forward only inside MPI calls, so a
// receive must keep testing while the bytes flow; after that it sleeps between tests, as a rank
// waiting for a slow peer should not burn its core. `what` describes the operation for error
// messages ("waiting to receive ... from rank 1"); it is only called on failure, keeping string
// formatting off the fast path. A wait that moves no data (`moves_data` false: a barrier)
// sleeps a thousandth of the time it has waited, from 50 us up to 1 ms: a rank waiting
// seconds (for its turn to measure the costs) then wakes rarely enough to leave the cores to
// those computing, and notices the end within 0.1% of its wait.
// Only a Work's wait may be interrupted (`may_interrupt`, Note [Abandoning a step]): an
// abandoned Work cancels its request and keeps its buffer; a collective's request cannot be
// cancelled.
template <typename Describe>
MPI_Status waitRequest(MpiCommunicator::Handle& handle, MPI_Request& request,
                       std::chrono::milliseconds timeout, const Describe& what,
                       bool may_interrupt = false, bool moves_data = true) {
  constexpr auto kBusy = std::chrono::milliseconds(1);
  constexpr auto kSpin = std::chrono::milliseconds(100);
  constexpr auto kReportCheck = std::chrono::milliseconds(20);
  const auto start = Clock::now();
  auto next_report_check = start;
  bool said_stalled = false;
  const auto deadline = start + timeout;
  MPI_Status status;
  for (;;) {
    int done = 0;
    int code = MPI_SUCCESS;
    {
      std::lock_guard<std::mutex> lock(handle.mutex);
      code = MPI_Test(&request, &done, &status);
    }
    if (code != MPI_SUCCESS) {
      throw CommError(
          detail::concat(mpiRankName(mpiWorldRank()), " ", what(), ": ", mpiErrorText(code)));
    }
    if (done) return status;
    const auto now = Clock::now();
    if (now > deadline) {
      throw timeoutError(timeout, detail::concat(mpiRankName(mpiWorldRank()), " ", what()));
    }
    if (now - start < kBusy) continue;
    // Note [Abandoning a step], Note [A wait cut short names its peer]
    if (interruptRequested()) stopWaiting(now - start, what, may_interrupt, said_stalled);
    if (now - start < kSpin) {
      std::this_thread::yield();
      continue;
    }
    if (now > next_report_check) {  // Note [Failure reports], Note [Abandoning a step]
      next_report_check = now + kReportCheck;
      if (may_interrupt && interruptible()) {  // a peer that abandoned its step
        bool notice = false;
        {
          std::lock_guard<std::mutex> lock(handle.mutex);  // Note [MPI thread level]
          notice = stopNoticeWaiting();
        }
        if (notice) {
          requestInterrupt();
          throw StepInterrupted();
        }
      }
      bool reported = false;
      if (handle.reports_to_here) {
        std::lock_guard<std::mutex> lock(handle.mutex);  // Note [MPI thread level]
        reported = failureReportWaiting();
      }
      if (reported) {
        throw PeerFailedError(detail::concat(mpiRankName(mpiWorldRank()), " ", what(),
                                             ": another rank reported a failure"));
      }
    }
    std::this_thread::sleep_for(napAfter(now - start, moves_data));
  }
}

int byteCount(const at::Tensor& t, const MessageTag& tag) {
  const auto bytes = t.numel() * static_cast<int64_t>(t.element_size());
  PPSTAGE_CHECK(bytes <= INT_MAX, tag.describe(), " is ", bytes, " bytes; MPI messages are ",
                "limited to ", INT_MAX, " bytes");
  return static_cast<int>(bytes);
}

// A host buffer for `tensor`'s bytes: the tensor itself when it is a contiguous CPU one,
// else a contiguous CPU tensor (pinned for a CUDA one, which `copy` then fills).
at::Tensor hostBuffer(const at::Tensor& tensor, bool copy) {
  if (tensor.is_cpu()) {
    if (tensor.is_contiguous()) return tensor;
    return copy ? tensor.contiguous() : at::empty_like(tensor).contiguous();
  }
  at::Tensor host =
      at::empty(tensor.sizes(), tensor.options().device(at::kCPU).pinned_memory(true));
  if (copy) host.copy_(tensor);
  return host;
}

class MpiWork final : public Work {
 public:
  // A send of `buffer` to `peer`, or (with `destination`) a receive from `peer` into
  // `buffer`, then copied to `destination` when that is another tensor.
  MpiWork(std::shared_ptr<MpiCommunicator::Handle> handle, at::Tensor buffer,
          at::Tensor destination, int peer, MessageTag tag)
      : handle_(std::move(handle)),
        buffer_(std::move(buffer)),
        destination_(std::move(destination)),
        peer_(peer),
        tag_(tag) {}

  ~MpiWork() override {
    if (done_ || !mpiActive()) return;
    // Abandoned (after a timeout): cancel and keep the buffer alive for good, as MPI may
    // still write to it.
    std::lock_guard<std::mutex> lock(handle_->mutex);
    MPI_Cancel(&request_);
    MPI_Request_free(&request_);
    static std::vector<at::Tensor>* abandoned = new std::vector<at::Tensor>();
    abandoned->push_back(buffer_);
  }

  MPI_Request* request() { return &request_; }

  bool isCompleted() override {
    if (done_) return true;
    int flag = 0;
    MPI_Status status;
    {
      std::lock_guard<std::mutex> lock(handle_->mutex);
      checkMpi(MPI_Test(&request_, &flag, &status), "MPI_Test");
    }
    if (flag) finish(status);
    return done_;
  }

  void wait(std::chrono::milliseconds timeout) override {
    if (done_) return;
    finish(waitRequest(
        *handle_, request_, timeout, [this] { return what(); }, true));
  }

 private:
  void finish(const MPI_Status& status) {
    done_ = true;
    if (!destination_.defined()) return;  // a send
    int received = 0;
    MPI_Get_count(&status, MPI_BYTE, &received);
    const auto expected = buffer_.numel() * static_cast<int64_t>(buffer_.element_size());
    if (received != expected) {
      throw CommError(detail::concat(mpiRankName(mpiWorldRank()), " ", what(), ": got ", received,
                                     " bytes, expected ", expected));
    }
    if (!destination_.is_same(buffer_)) destination_.copy_(buffer_);
  }

  std::string what() const {
    const int peer = handle_->world_rank.at(static_cast<size_t>(peer_));
    return destination_.defined()
               ? detail::concat("waiting to receive ", tag_.describe(), " from ", mpiRankName(peer))
               : detail::concat("sending ", tag_.describe(), " to ", mpiRankName(peer));
  }

  std::shared_ptr<MpiCommunicator::Handle> handle_;
  MPI_Request request_ = MPI_REQUEST_NULL;
  at::Tensor buffer_;       // contiguous bytes on the wire
  at::Tensor destination_;  // receives only: where the bytes go
  int peer_;
  MessageTag tag_;
  bool done_ = false;
};

// The dtypes an all-reduce sums (the reduced floating types in float32, wireType).
void checkSummable(at::ScalarType dtype) {
  switch (dtype) {
    case at::kFloat:
    case at::kDouble:
    case at::kHalf:
    case at::kBFloat16:
    case at::kLong:
    case at::kInt:
    case at::kShort:
    case at::kChar:
    case at::kByte: return;
    default: break;
  }
  PPSTAGE_FAIL("all-reduce of ", c10::toString(dtype), " tensors is not supported");
}

// Half-precision types are summed in float32.
at::ScalarType wireType(at::ScalarType dtype) {
  return dtype == at::kHalf || dtype == at::kBFloat16 ? at::kFloat : dtype;
}

}  // namespace

std::unique_ptr<MpiCommunicator> MpiCommunicator::world(CommOptions options) {
  PPSTAGE_CHECK(mpiActive(), "MPI is not initialized (start ppstage through an MpiSession)");
  auto handle = std::make_shared<Handle>();
  checkMpi(MPI_Comm_dup(MPI_COMM_WORLD, &handle->comm), "MPI_Comm_dup");
  return std::unique_ptr<MpiCommunicator>(new MpiCommunicator(std::move(handle), options));
}

MpiCommunicator::MpiCommunicator(std::shared_ptr<Handle> handle, CommOptions options)
    : Communicator(options), handle_(std::move(handle)) {
  MPI_Comm_set_errhandler(handle_->comm, MPI_ERRORS_RETURN);
  MPI_Comm_rank(handle_->comm, &rank_);
  MPI_Comm_size(handle_->comm, &size_);
  std::vector<int> ranks(static_cast<size_t>(size_));
  for (int r = 0; r < size_; ++r) ranks[static_cast<size_t>(r)] = r;
  handle_->world_rank.resize(ranks.size());
  MPI_Group group = MPI_GROUP_NULL, world_group = MPI_GROUP_NULL;
  MPI_Comm_group(handle_->comm, &group);
  MPI_Comm_group(MPI_COMM_WORLD, &world_group);
  MPI_Group_translate_ranks(group, size_, ranks.data(), world_group, handle_->world_rank.data());
  MPI_Group_free(&group);
  MPI_Group_free(&world_group);
  handle_->reports_to_here = mpiWorldRank() == 0;
  int* tag_ub = nullptr;
  int found = 0;
  MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &tag_ub, &found);
  const int largest = MessageTag{MessageKind::kControl, MessageTag::kMaxStage,
                                 MessageTag::kMaxMicrobatch, MessageTag::kMaxTensor}
                          .encode();
  PPSTAGE_CHECK(found && *tag_ub >= largest, "this MPI's largest tag (", found ? *tag_ub : -1,
                ") is below ppstage's ", largest);
}

MpiCommunicator::~MpiCommunicator() = default;

std::shared_ptr<Work> MpiCommunicator::send(const at::Tensor& tensor, int dst, MessageTag tag) {
  at::Tensor buffer = hostBuffer(tensor, /*copy=*/true);
  auto work = std::make_shared<MpiWork>(handle_, buffer, at::Tensor(), dst, tag);
  std::lock_guard<std::mutex> lock(handle_->mutex);
  checkMpi(MPI_Isend(buffer.data_ptr(), byteCount(buffer, tag), MPI_BYTE, dst, tag.encode(),
                     handle_->comm, work->request()),
           "MPI_Isend");
  return work;
}

std::shared_ptr<Work> MpiCommunicator::recv(const at::Tensor& tensor, int src, MessageTag tag) {
  at::Tensor buffer = hostBuffer(tensor, /*copy=*/false);
  auto work = std::make_shared<MpiWork>(handle_, buffer, tensor, src, tag);
  std::lock_guard<std::mutex> lock(handle_->mutex);
  checkMpi(MPI_Irecv(buffer.data_ptr(), byteCount(buffer, tag), MPI_BYTE, src, tag.encode(),
                     handle_->comm, work->request()),
           "MPI_Irecv");
  return work;
}

// Every bucket goes around the ring (ring_all_reduce.h), whatever its size: it moves large
// ones several times faster than Open MPI's MPI_Iallreduce did here, costs small ones a few
// microseconds a step, and a rank that waits in it too long names the rank it waits for.
void MpiCommunicator::allReduceSum(const std::vector<at::Tensor>& tensors) {
  for (std::vector<at::Tensor>& bucket : bucketsByDtype(tensors, kAllReduceBucketBytes)) {
    checkSummable(bucket.front().scalar_type());
    FlatBuffer flat = flatten(std::move(bucket));  // one bucket's copy at a time
    flat.buffer = flat.buffer.to(at::kCPU, wireType(flat.buffer.scalar_type())).contiguous();
    try {
      ringAllReduceSum(*this, flat.buffer);
    } catch (const PeerFailedError&) {
      throw;  // not this all-reduce's failure: Note [Failure reports]
    } catch (const CommError& e) {
      throw CommError(detail::concat(e.what(), " (in an all-reduce of ", flat.tensors.size(),
                                     " tensors over ", size_, " ranks)"));
    }
    unflatten(flat);
  }
}

void MpiCommunicator::broadcast(std::string& bytes, int root) {
  uint64_t length = bytes.size();
  MPI_Request request = MPI_REQUEST_NULL;
  const int world_root = handle_->world_rank.at(static_cast<size_t>(root));
  const auto what = [world_root] {
    return detail::concat("in a broadcast from ", mpiRankName(world_root));
  };
  {
    std::lock_guard<std::mutex> lock(handle_->mutex);
    checkMpi(MPI_Ibcast(&length, 1, MPI_UINT64_T, root, handle_->comm, &request), "MPI_Ibcast");
  }
  waitRequest(*handle_, request, options().timeout, what);
  PPSTAGE_CHECK(length <= INT_MAX, "broadcast of ", length, " bytes is above MPI's limit");
  bytes.resize(length);
  if (length == 0) return;
  {
    std::lock_guard<std::mutex> lock(handle_->mutex);
    checkMpi(
        MPI_Ibcast(bytes.data(), static_cast<int>(length), MPI_BYTE, root, handle_->comm, &request),
        "MPI_Ibcast");
  }
  waitRequest(*handle_, request, options().timeout, what);
}

void MpiCommunicator::barrier() {
  MPI_Request request = MPI_REQUEST_NULL;
  {
    std::lock_guard<std::mutex> lock(handle_->mutex);
    checkMpi(MPI_Ibarrier(handle_->comm, &request), "MPI_Ibarrier");
  }
  waitRequest(
      *handle_, request, options().timeout, [] { return std::string("in a barrier"); },
      /*may_interrupt=*/false, /*moves_data=*/false);
}

std::unique_ptr<Communicator> MpiCommunicator::split(int color, int key) {
  auto handle = std::make_shared<Handle>();
  {
    std::lock_guard<std::mutex> lock(handle_->mutex);
    checkMpi(MPI_Comm_split(handle_->comm, color, key, &handle->comm), "MPI_Comm_split");
  }
  return std::unique_ptr<Communicator>(new MpiCommunicator(std::move(handle), options()));
}

void MpiCommunicator::abort(int exit_code) {
  MPI_Abort(handle_->comm, exit_code);
  std::_Exit(exit_code);
}

}  // namespace ppstage
