// Peer-to-peer all-to-all between the GPUs of one node: the host side shared by the XLA FFI
// handler (all2all_ffi.cc), the ctypes entry points used from Python and the virtual-rank harness.
//
// A communicator holds one or more groups of n ranks. Each rank owns one allocation on its GPU:
//   [slot 0 | slot 1 | control block]
// Senders write their chunk for rank t straight into slot (seq & 1) of rank t (ping-pong), then
// signal; a rank's exchange ends when every source has signalled, and a second kernel copies the
// slot into the XLA-owned output. See all2all.cu for the protocol and why it is safe.
//
// Two modes build the same pointer table (GroupView): one process driving every GPU of a group
// (peer access, raw pointers; all2all_comm.cu: CreateComm), or one process per GPU, where each
// process allocates its own ranks, exports CUDA IPC handles and opens its peers' (PrepareIpc,
// OpenIpc; Python exchanges the handles through the jax.distributed key-value store).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace ltx_a2a {

constexpr int kMaxRanks = 8;

// Written once per process and group, by the first of the process's ranks that fails; host-mapped
// so the host reads it without a sync.
struct ErrorRecord {
  int flag;  // 0 until a failure is recorded
  int kind;  // ErrorKind
  int rank;
  int peer;
  int device;
  unsigned expected;
  unsigned got;
};

// kPeerFailed: this process's rank found the group dead, marked by a rank of another process.
enum ErrorKind : int { kTimeout = 1, kBadRank = 2, kPeerFailed = 3 };

// The control block at the end of every rank's allocation (device memory, zeroed at creation).
struct Control {
  unsigned arrive[kMaxRanks];  // blocks of source s that finished writing into this rank (monotonic)
  unsigned seq;                // exchanges this rank has completed; its parity picks the slot
  unsigned done;               // blocks of the copy-out kernel that finished (last one bumps seq)
  unsigned dead;               // set on every rank when any rank fails: later kernels do nothing
  unsigned claim;              // of the process's first rank in the group: who writes the ErrorRecord
};

// Everything a kernel needs about one group, passed by value (all addresses are persistent).
struct GroupView {
  int n;
  int nblocks;     // blocks of the send kernel; equal on every rank, so arrivals per source are known
  unsigned local;  // bit r: rank r's kernels run in this process (its memory was allocated here)
  int ordinal[kMaxRanks];  // each rank's CUDA device, as numbered in the process that owns it
  char* slots[kMaxRanks];
  Control* control[kMaxRanks];
  unsigned* claim;     // &control[first local rank]->claim
  ErrorRecord* error;  // host-mapped, device address; one per group and process
  unsigned long long slot_bytes;
  unsigned long long timeout_ns;
};

// One all-to-all, collapsed to [P, lo, Q, hi, R] around the split and concat axes.
struct Geometry {
  unsigned long long rows;          // rows copied to each target: P * lo_chunk * Q
  unsigned lo_chunk, q;             // lo rows per target; middle extent Q
  unsigned long long lo_in, lo_out;  // lo extent of input and output
  unsigned long long lo_src_step, lo_dst_step;  // lo offset of target t's rows in x: t*lo_src_step; in slot: s*lo_dst_step
  unsigned long long hi_in_bytes, hi_out_bytes;  // row pitch in x and in the output
  unsigned long long hi_src_step, hi_dst_step;  // byte offset within a row: t*hi_src_step in x, s*hi_dst_step in out
  unsigned long long row_bytes;      // contiguous bytes copied per row
  unsigned long long out_bytes;      // this rank's output bytes
  int unit;                          // bytes per thread per access: 16, 8, 4, 2 or 1
};

// One device allocation this process made (cudaMalloc) or mapped (cudaIpcOpenMemHandle).
struct Mapping {
  int ordinal;
  char* base;
  bool opened;
};

// Host state of a communicator. Registered for good once complete: captured CUDA graphs keep its
// addresses. A failed creation frees everything it allocated or opened.
struct Comm {
  int id = -1;
  bool ready = false;  // false while the IPC handles are being exchanged
  std::vector<GroupView> groups;
  std::vector<Mapping> mappings;
  ErrorRecord* errors = nullptr;  // host address of one record per group
  double timeout_s = 0;
};

// "what: cudaErrorX (description)".
std::string CudaError(const char* what, cudaError_t err);

// Returns the failure of a CUDA call as a string from the enclosing function.
#define A2A_CHECK(call)                                              \
  do {                                                               \
    cudaError_t err_ = (call);                                       \
    if (err_ != cudaSuccess) return ::ltx_a2a::CudaError(#call, err_); \
  } while (0)

// Restores the calling thread's current device when it goes out of scope.
class DeviceGuard {
 public:
  DeviceGuard() {
    if (cudaGetDevice(&previous_) != cudaSuccess) previous_ = -1;
  }
  ~DeviceGuard() {
    if (previous_ >= 0) cudaSetDevice(previous_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
};

// The complete communicator `id`, or nullptr (unknown, pending or freed).
Comm* FindComm(int id);

// Loads every kernel on device `ordinal` (see all2all.cu for why), leaving it current.
std::string LoadAllKernels(int ordinal);

// One process, every rank local. Returns "" and the id, or the reason (nothing left allocated).
std::string CreateComm(int groups, int n, const int* ordinals, unsigned long long slot_bytes, int nblocks,
                       double timeout_s, int* id);

// One process per GPU, step 1: allocates the ranks with owned[g * n + r] != 0 and writes each one's
// cudaIpcMemHandle_t into handles[g * n + r]. Returns "" and a pending id, or the reason. The
// resolved send-kernel grid and slot size go to *nblocks and *slot_bytes: every process must agree.
std::string PrepareIpc(int groups, int n, const int* ordinals, const int* owned, unsigned long long* slot_bytes,
                       int* nblocks, double timeout_s, cudaIpcMemHandle_t* handles, int* id);

// Step 2: opens the other ranks' handles (handles[g * n + r]; owned ones are ignored; ordinals[g * n + r]
// is each rank's GPU in its own process, for messages) and completes communicator `id`. On failure
// the communicator is retired (see AbortIpc with published = 1).
std::string OpenIpc(int id, const cudaIpcMemHandle_t* handles, const int* ordinals);

// Gives up a pending communicator whose handle exchange failed. Unpublished: everything is freed.
// Published (peers may have mapped this process's buffers and may still write into them): the
// buffers are kept (leaked) and every reachable rank of its groups is marked dead, so peers' next
// exchange stops at once instead of writing into memory that could be reused.
void AbortIpc(int id, bool published);

// Returns "" on success, else the reason. `dims` is x's shape; split/concat are axes of x.
std::string MakeGeometry(int n, int ndim, const long long* dims, int split_axis, int concat_axis, int elem_bytes,
                         Geometry* geo);

// Enqueues one exchange for the rank whose index is at device address `rank` on `stream`.
// `ordinal` is the device `stream` belongs to. Returns "" or the reason nothing was launched.
// The calling thread's current device is unchanged.
std::string Launch(int comm, int ordinal, const int* rank, const void* x, void* out, const Geometry& geo,
                   cudaStream_t stream);

// "" while the communicator is healthy, else the recorded failure as a sentence.
std::string ErrorMessage(int comm);

}  // namespace ltx_a2a

extern "C" {
// Creates a communicator of `groups` groups of `n` ranks; ordinals[g * n + r] is rank r's device
// in group g (repeat a device for virtual ranks). Returns its id, or -1 with the reason in `err`.
int ltx_a2a_create(int groups, int n, const int* ordinals, unsigned long long slot_bytes, int nblocks,
                   double timeout_s, char* err, int err_len);
// Size of one exported handle (cudaIpcMemHandle_t).
int ltx_a2a_handle_bytes(void);
// PrepareIpc; `handles` holds groups * n handles. Returns the pending id, or -1 with the reason.
int ltx_a2a_ipc_prepare(int groups, int n, const int* ordinals, const int* owned, unsigned long long* slot_bytes,
                        int* nblocks, double timeout_s, char* handles, char* err, int err_len);
// OpenIpc. Returns the communicator's id, or -1 with the reason.
int ltx_a2a_ipc_open(int pending, const char* handles, const int* ordinals, char* err, int err_len);
// AbortIpc.
void ltx_a2a_ipc_abort(int pending, int published);
// 1 and the message in `msg` if the communicator has failed, else 0.
int ltx_a2a_error(int comm, char* msg, int msg_len);
}
