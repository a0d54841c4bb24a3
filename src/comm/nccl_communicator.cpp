// See include/ppstage/comm/nccl_communicator.h. Built only with PPSTAGE_WITH_NCCL.
//
// Stream discipline: before an operation, an event recorded on the caller's current stream
// makes the communication stream wait for the tensor to be ready; the operation's own
// event, recorded on the communication stream after it, is what Work waits on. Tensors
// used on the communication stream are recorded with the caching allocator so that their
// memory is not reused while NCCL still reads or writes it.
//
// Note [Non-blocking NCCL]: every communicator is made non-blocking (ncclConfig_t's
// blocking = 0), so that no NCCL call can hold the host: init, split, a group's end and a
// collective may return ncclInProgress, and the call is over when ncclCommGetAsyncError
// says so. Each such wait, and each wait for an operation's event, is bounded by
// --comm.timeout_s and polls the communicator's asynchronous error (a peer gone, a network
// failure); either ends in ncclCommAbort and a CommError naming what was waited for. The
// host thread that waits is the watchdog: the executor waits on every operation's Work
// within a step. What a step abandoned after a failure (receives posted early) nobody
// polls: closing a communicator finalizes it within the timeout and aborts it past that.
// NCCL runs a non-blocking group's end in a thread it starts for it (group.cc): a cost per
// group to measure on a GPU against blocking communicators.
#include "ppstage/comm/nccl_communicator.h"

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <nccl.h>

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>
#include <utility>

#include "flat_buffers.h"
#include "ppstage/core/all_reduce_buckets.h"
#include "ppstage/core/error.h"

namespace ppstage {

namespace {

// A CUDA stream of the communicator's own. Not one of c10's pool, which hands out 32 streams
// round robin: two channels (comm/peer_channels.h) on one pooled stream would queue behind
// each other, which is the hang channels exist to avoid.
cudaStream_t ownStream(int device) {
  c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device));
  cudaStream_t stream = nullptr;
  C10_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  return stream;
}

using Clock = std::chrono::steady_clock;

// The communicator's asynchronous state: ncclSuccess, ncclInProgress while a non-blocking
// call runs, or the error that broke it (also when asking for it failed).
ncclResult_t asyncState(ncclComm_t comm) {
  ncclResult_t state = ncclSuccess;
  const ncclResult_t asked = ncclCommGetAsyncError(comm, &state);
  return asked != ncclSuccess ? asked : state;
}

// Between two polls: spins for the first millisecond after `since`, so that a short wait
// ends at once, then sleeps 50 us at a time, so that a long one does not burn a core.
void pauseAfter(Clock::time_point since) {
  if (Clock::now() - since < std::chrono::milliseconds(1)) {
    std::this_thread::yield();
  } else {
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

// Polls `comm` while a non-blocking call on it is in progress, up to `deadline`: its state
// then (ncclInProgress: time ran out).
ncclResult_t awaitState(ncclComm_t comm, Clock::time_point deadline) {
  const Clock::time_point since = Clock::now();
  ncclResult_t state = ncclInProgress;
  while ((state = asyncState(comm)) == ncclInProgress && Clock::now() <= deadline) {
    pauseAfter(since);
  }
  return state;
}

// Finalizes `comm` (its queued operations flushed, non-blocking) within `timeout`, then
// frees it; aborts it instead when that fails or takes longer. A destructor must not hang
// on a dead peer, as ncclCommDestroy alone would.
void closeCommunicator(ncclComm_t comm, std::chrono::milliseconds timeout) noexcept {
  ncclResult_t state = ncclCommFinalize(comm);
  if (state == ncclInProgress) state = awaitState(comm, Clock::now() + timeout);
  if (state == ncclSuccess) {
    ncclCommDestroy(comm);
  } else {
    ncclCommAbort(comm);
  }
}

}  // namespace

struct NcclCommunicator::Impl {
  Impl(std::unique_ptr<Communicator> bootstrap, int device, std::chrono::milliseconds timeout)
      : bootstrap(std::move(bootstrap)),
        device(device),
        timeout(timeout),
        raw_stream(ownStream(device)),
        stream(
            c10::cuda::getStreamFromExternal(raw_stream, static_cast<c10::DeviceIndex>(device))) {}
  ~Impl() {
    if (comm != nullptr) closeCommunicator(comm, timeout);
    cudaStreamDestroy(raw_stream);
  }

  std::unique_ptr<Communicator> bootstrap;  // MPI: unique id, bytes, splits
  int device;
  std::chrono::milliseconds timeout;  // --comm.timeout_s, also for closing
  cudaStream_t raw_stream;
  c10::cuda::CUDAStream stream;  // every NCCL call runs here
  ncclComm_t comm = nullptr;     // null once aborted
  std::mutex mutex;              // one NCCL call at a time on `comm`
};

namespace {

using Impl = NcclCommunicator::Impl;

void checkNccl(ncclResult_t result, const char* call) {
  if (result != ncclSuccess) {
    throw CommError(detail::concat(call, " failed: ", ncclGetErrorString(result)));
  }
}

ncclConfig_t nonBlockingConfig() {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  return config;
}

// Aborts `comm` and throws: it failed with `state`, or (ncclInProgress) ran out of time.
template <typename Describe>
[[noreturn]] void abortAndThrow(ncclComm_t comm, ncclResult_t state,
                                std::chrono::milliseconds timeout, const Describe& what) {
  const std::string last_error = ncclGetLastError(comm);  // NCCL's last message, any comm's
  ncclCommAbort(comm);
  if (state == ncclInProgress) throw timeoutError(timeout, what());
  throw CommError(detail::concat("NCCL failed ", what(), ": ", ncclGetErrorString(state), " (",
                                 last_error, ")"));
}

// Ends a non-blocking call on `comm` that returned `result` (Note [Non-blocking NCCL]):
// waits while it is in progress, up to `timeout`. On a failure or a timeout, aborts `comm`
// and throws.
template <typename Describe>
void finishCall(ncclComm_t comm, ncclResult_t result, std::chrono::milliseconds timeout,
                const Describe& what) {
  if (result == ncclSuccess) return;
  const ncclResult_t state =
      result == ncclInProgress ? awaitState(comm, Clock::now() + timeout) : result;
  if (state != ncclSuccess) abortAndThrow(comm, state, timeout, what);
}

// finishCall on the communicator of `impl`, which is null (aborted) if it throws.
template <typename Describe>
void finishOn(Impl& impl, ncclResult_t result, std::chrono::milliseconds timeout,
              const Describe& what) {
  try {
    finishCall(impl.comm, result, timeout,
               [&] { return detail::concat("rank ", impl.bootstrap->rank(), " ", what()); });
  } catch (...) {
    impl.comm = nullptr;
    throw;
  }
}

ncclDataType_t ncclType(at::ScalarType dtype) {
  switch (dtype) {
    case at::kFloat: return ncclFloat32;
    case at::kDouble: return ncclFloat64;
    case at::kHalf: return ncclFloat16;
    case at::kBFloat16: return ncclBfloat16;
    case at::kLong: return ncclInt64;
    case at::kInt: return ncclInt32;
    case at::kChar: return ncclInt8;
    case at::kByte: return ncclUint8;
    default: break;
  }
  PPSTAGE_FAIL("NCCL all-reduce of ", c10::toString(dtype), " tensors is not supported");
}

// The communication stream waits for what the current stream has queued so far.
void orderAfterCurrentStream(const Impl& impl) {
  at::cuda::CUDAEvent ready;
  ready.record(c10::cuda::getCurrentCUDAStream(impl.device));
  ready.block(impl.stream);
}

void keepAliveOnStream(const at::Tensor& t, const Impl& impl) {
  c10::cuda::CUDACachingAllocator::recordStream(t.storage().data_ptr(), impl.stream);
}

// Polls `event` until done, `timeout` or an asynchronous error of the communicator (checked
// every millisecond, under the lock); on either of the last two aborts it (the pending
// operation can never finish) and throws naming `what`.
template <typename Describe>
void waitEvent(Impl& impl, at::cuda::CUDAEvent& event, std::chrono::milliseconds timeout,
               const Describe& what) {
  const Clock::time_point since = Clock::now();
  const Clock::time_point deadline = since + timeout;
  Clock::time_point next_check = since;
  while (!event.query()) {
    if (Clock::now() >= next_check) {
      std::lock_guard<std::mutex> lock(impl.mutex);
      PPSTAGE_CHECK(impl.comm != nullptr, "the NCCL communicator was aborted");
      const ncclResult_t state = asyncState(impl.comm);
      const bool failed = state != ncclSuccess && state != ncclInProgress;
      if (failed || Clock::now() > deadline) {
        abortAndThrow(std::exchange(impl.comm, nullptr), failed ? state : ncclInProgress, timeout,
                      [&] { return detail::concat("rank ", impl.bootstrap->rank(), " ", what()); });
      }
      next_check = Clock::now() + std::chrono::milliseconds(1);
    }
    pauseAfter(since);
  }
}

class NcclWork final : public Work {
 public:
  NcclWork(std::shared_ptr<Impl> impl, std::shared_ptr<at::cuda::CUDAEvent> done, at::Tensor buffer,
           at::Tensor destination, int peer, MessageTag tag)
      : impl_(std::move(impl)),
        done_(std::move(done)),
        buffer_(std::move(buffer)),
        destination_(std::move(destination)),
        peer_(peer),
        tag_(tag) {}

  bool isCompleted() override { return finished_ || done_->query(); }

  void wait(std::chrono::milliseconds timeout) override {
    if (finished_) return;
    waitEvent(*impl_, *done_, timeout, [this] {
      return destination_.defined()
                 ? detail::concat("waiting to receive ", tag_.describe(), " from rank ", peer_)
                 : detail::concat("sending ", tag_.describe(), " to rank ", peer_);
    });
    finished_ = true;
    // Work queued later on the current stream sees the data.
    done_->block(c10::cuda::getCurrentCUDAStream(impl_->device));
    if (destination_.defined() && !destination_.is_same(buffer_)) destination_.copy_(buffer_);
  }

 private:
  std::shared_ptr<Impl> impl_;
  std::shared_ptr<at::cuda::CUDAEvent> done_;
  at::Tensor buffer_;
  at::Tensor destination_;
  int peer_;
  MessageTag tag_;
  bool finished_ = false;
};

}  // namespace

std::unique_ptr<NcclCommunicator> NcclCommunicator::create(std::unique_ptr<Communicator> bootstrap,
                                                           int device, CommOptions options) {
  auto impl = std::make_shared<Impl>(std::move(bootstrap), device, options.timeout);
  ncclUniqueId id;
  std::string bytes;
  if (impl->bootstrap->rank() == 0) {
    checkNccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
    bytes.assign(reinterpret_cast<const char*>(&id), sizeof id);
  }
  impl->bootstrap->broadcast(bytes, 0);
  PPSTAGE_INTERNAL_ASSERT(bytes.size() == sizeof id, "NCCL unique id of ", bytes.size(), " bytes");
  std::memcpy(&id, bytes.data(), sizeof id);
  c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device));
  ncclConfig_t config = nonBlockingConfig();
  ncclComm_t comm = nullptr;
  const ncclResult_t result =
      ncclCommInitRankConfig(&comm, impl->bootstrap->size(), id, impl->bootstrap->rank(), &config);
  if (comm == nullptr) checkNccl(result, "ncclCommInitRankConfig");
  finishCall(comm, result, options.timeout, [&] {
    return detail::concat("rank ", impl->bootstrap->rank(), " creating a communicator of ",
                          impl->bootstrap->size(), " ranks");
  });
  impl->comm = comm;
  return std::unique_ptr<NcclCommunicator>(new NcclCommunicator(std::move(impl), options));
}

NcclCommunicator::NcclCommunicator(std::shared_ptr<Impl> impl, CommOptions options)
    : Communicator(options), impl_(std::move(impl)) {}

NcclCommunicator::~NcclCommunicator() = default;

int NcclCommunicator::rank() const { return impl_->bootstrap->rank(); }
int NcclCommunicator::size() const { return impl_->bootstrap->size(); }

std::vector<std::shared_ptr<Work>> NcclCommunicator::batch(const std::vector<P2pOp>& ops) {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  PPSTAGE_CHECK(impl_->comm != nullptr, "the NCCL communicator was aborted");
  c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(impl_->device));
  // Contiguous buffers first (a send's packing copy runs on the current stream), then the
  // communication stream waits for all of it: recording the event before the packing
  // would let NCCL read the buffer before its bytes are written.
  std::vector<at::Tensor> buffers;
  for (const P2pOp& op : ops) {
    PPSTAGE_CHECK(op.tensor.is_cuda() && op.tensor.get_device() == impl_->device,
                  "NCCL sends tensors on cuda:", impl_->device, "; got one on ",
                  op.tensor.device());
    const bool send = op.kind == P2pOp::Kind::kSend;
    if (op.tensor.is_contiguous()) {
      buffers.push_back(op.tensor);
    } else {
      buffers.push_back(send ? op.tensor.contiguous()
                             : at::empty_like(op.tensor, at::MemoryFormat::Contiguous));
    }
  }
  orderAfterCurrentStream(*impl_);
  checkNccl(ncclGroupStart(), "ncclGroupStart");
  for (size_t i = 0; i < ops.size(); ++i) {
    const P2pOp& op = ops[i];
    const bool send = op.kind == P2pOp::Kind::kSend;
    const at::Tensor& buffer = buffers[i];
    const size_t bytes = buffer.numel() * buffer.element_size();
    const ncclResult_t result =
        send ? ncclSend(buffer.data_ptr(), bytes, ncclUint8, op.peer, impl_->comm, impl_->stream)
             : ncclRecv(buffer.data_ptr(), bytes, ncclUint8, op.peer, impl_->comm, impl_->stream);
    if (result != ncclSuccess) {  // the communicator keeps the error: it is done for
      ncclGroupEnd();
      abortAndThrow(std::exchange(impl_->comm, nullptr), result, options().timeout, [&] {
        return detail::concat("rank ", rank(),
                              send ? " posting a send to rank " : " posting a receive from rank ",
                              op.peer);
      });
    }
    keepAliveOnStream(buffer, *impl_);
  }
  finishOn(*impl_, ncclGroupEnd(), options().timeout, [&] {
    return detail::concat("posting a group of ", ops.size(), " sends and receives");
  });
  auto done = std::make_shared<at::cuda::CUDAEvent>();
  done->record(impl_->stream);
  std::vector<std::shared_ptr<Work>> works;
  for (size_t i = 0; i < ops.size(); ++i) {
    const bool send = ops[i].kind == P2pOp::Kind::kSend;
    works.push_back(std::make_shared<NcclWork>(
        impl_, done, buffers[i], send ? at::Tensor() : ops[i].tensor, ops[i].peer, ops[i].tag));
  }
  return works;
}

std::shared_ptr<Work> NcclCommunicator::send(const at::Tensor& tensor, int dst, MessageTag tag) {
  return batch({P2pOp{P2pOp::Kind::kSend, tensor, dst, tag}}).front();
}

std::shared_ptr<Work> NcclCommunicator::recv(const at::Tensor& tensor, int src, MessageTag tag) {
  return batch({P2pOp{P2pOp::Kind::kRecv, tensor, src, tag}}).front();
}

void NcclCommunicator::allReduceSum(const std::vector<at::Tensor>& tensors) {
  c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(impl_->device));
  // In the planner's buckets (core/all_reduce_buckets.h); bf16 and fp16 summed in fp32, as
  // MPI sums them.
  for (const at::Tensor& t : tensors) {
    PPSTAGE_CHECK(t.is_cuda() && t.get_device() == impl_->device,
                  "NCCL all-reduces tensors on cuda:", impl_->device, "; got one on ", t.device());
  }
  for (std::vector<at::Tensor>& bucket : bucketsByDtype(tensors, kAllReduceBucketBytes)) {
    FlatBuffer flat = flatten(std::move(bucket));
    const at::ScalarType dtype = flat.buffer.scalar_type();
    if (dtype == at::kBFloat16 || dtype == at::kHalf) flat.buffer = flat.buffer.to(at::kFloat);
    const at::Tensor& buffer = flat.buffer;
    at::cuda::CUDAEvent done;
    {
      std::lock_guard<std::mutex> lock(impl_->mutex);
      PPSTAGE_CHECK(impl_->comm != nullptr, "the NCCL communicator was aborted");
      orderAfterCurrentStream(*impl_);
      finishOn(*impl_,
               ncclAllReduce(buffer.data_ptr(), buffer.data_ptr(), buffer.numel(),
                             ncclType(buffer.scalar_type()), ncclSum, impl_->comm, impl_->stream),
               options().timeout, [] { return std::string("posting an all-reduce"); });
      keepAliveOnStream(buffer, *impl_);
      done.record(impl_->stream);
    }
    waitEvent(*impl_, done, options().timeout, [&] {
      return detail::concat("in an all-reduce of ", flat.tensors.size(), " tensors");
    });
    done.block(c10::cuda::getCurrentCUDAStream(impl_->device));
    unflatten(flat);
  }
}

void NcclCommunicator::broadcast(std::string& bytes, int root) {
  impl_->bootstrap->broadcast(bytes, root);
}

void NcclCommunicator::barrier() {
  at::Tensor one = at::ones({1}, at::device(at::Device(at::kCUDA, impl_->device)));
  allReduceSum({one});
}

// ncclCommSplit (without splitShare: the new communicator has resources of its own, but no
// unique id to exchange). The bootstrap splits alike, for the new communicator's
// broadcasts.
std::unique_ptr<Communicator> NcclCommunicator::split(int color, int key) {
  PPSTAGE_CHECK(color >= 0, "an NCCL split's color must be >= 0; got ", color);
  {  // before the bootstrap's split, which the other ranks would wait in
    std::lock_guard<std::mutex> lock(impl_->mutex);
    PPSTAGE_CHECK(impl_->comm != nullptr, "the NCCL communicator was aborted");
  }
  auto impl =
      std::make_shared<Impl>(impl_->bootstrap->split(color, key), impl_->device, options().timeout);
  c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(impl_->device));
  std::lock_guard<std::mutex> lock(impl_->mutex);
  PPSTAGE_CHECK(impl_->comm != nullptr, "the NCCL communicator was aborted");
  const auto what = [&] {
    return detail::concat("splitting color ", color, " (", impl->bootstrap->size(), " ranks)");
  };
  // Non-blocking, the split runs in a thread of NCCL's while the PARENT is in progress
  // (NVIDIA/nccl#1472), and that thread writes the new communicator into impl->comm (heap
  // memory: it outlives this call) when it is done. So the parent is polled; aborting it
  // joins the thread, after which the child, if any, goes too.
  ncclConfig_t config = nonBlockingConfig();
  try {
    finishOn(*impl_, ncclCommSplit(impl_->comm, color, key, &impl->comm, &config),
             options().timeout, what);
  } catch (...) {
    if (ncclComm_t child = __atomic_load_n(&impl->comm, __ATOMIC_ACQUIRE)) ncclCommAbort(child);
    impl->comm = nullptr;
    throw;
  }
  const Clock::time_point since = Clock::now();
  while (__atomic_load_n(&impl->comm, __ATOMIC_ACQUIRE) == nullptr) {
    if (Clock::now() - since > options().timeout) {
      throw timeoutError(
          options().timeout,
          detail::concat("rank ", rank(), " waiting for ncclCommSplit's communicator"));
    }
    pauseAfter(since);
  }
  finishOn(*impl, ncclInProgress, options().timeout, what);  // the child's own start
  return std::unique_ptr<NcclCommunicator>(new NcclCommunicator(std::move(impl), options()));
}

void NcclCommunicator::abort(int exit_code) {
  // Another thread may hold the lock in a wait: then the process ends without NCCL's abort.
  std::unique_lock<std::mutex> lock(impl_->mutex, std::try_to_lock);
  if (lock.owns_lock() && impl_->comm != nullptr)
    ncclCommAbort(std::exchange(impl_->comm, nullptr));
  impl_->bootstrap->abort(exit_code);
  std::abort();  // not reached: every Communicator::abort ends the process or throws
}

}  // namespace ppstage
