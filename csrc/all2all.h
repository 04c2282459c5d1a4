// Peer-to-peer all-to-all between the GPUs of one node: the host side shared by the XLA FFI
// handler (all2all_ffi.cc), the ctypes entry points used from Python and the virtual-rank harness.
//
// A communicator holds one or more groups of n ranks. Each rank owns one allocation on its GPU:
//   [slot 0 | slot 1 | control block]
// Senders write their chunk for rank t straight into slot (seq & 1) of rank t (ping-pong), then
// signal; a rank's exchange ends when every source has signalled, and a second kernel copies the
// slot into the XLA-owned output. See all2all.cu for the protocol and why it is safe.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>

namespace ltx_a2a {

constexpr int kMaxRanks = 8;

// Written once, by the first rank that fails; host-mapped so the host reads it without a sync.
struct ErrorRecord {
  int flag;  // 0 until a failure is recorded
  int kind;  // ErrorKind
  int rank;
  int peer;
  int device;
  unsigned expected;
  unsigned got;
};

enum ErrorKind : int { kTimeout = 1, kBadRank = 2 };

// The control block at the end of every rank's allocation (device memory, zeroed at creation).
struct Control {
  unsigned arrive[kMaxRanks];  // blocks of source s that finished writing into this rank (monotonic)
  unsigned seq;                // exchanges this rank has completed; its parity picks the slot
  unsigned done;               // blocks of the copy-out kernel that finished (last one bumps seq)
  unsigned dead;               // set on every rank when any rank fails: later kernels do nothing
};

// Everything a kernel needs about one group, passed by value (all addresses are persistent).
struct GroupView {
  int n;
  int nblocks;  // blocks of the send kernel; equal on every rank, so arrivals per source are known
  int ordinal[kMaxRanks];
  char* slots[kMaxRanks];
  Control* control[kMaxRanks];
  ErrorRecord* error;  // host-mapped, device address
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

// Returns "" on success, else the reason. `dims` is x's shape; split/concat are axes of x.
std::string MakeGeometry(int n, int ndim, const long long* dims, int split_axis, int concat_axis, int elem_bytes,
                         Geometry* geo);

// Enqueues one exchange for the rank whose index is at device address `rank` on `stream`.
// `ordinal` is the device `stream` belongs to. Returns "" or the reason nothing was launched.
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
// 1 and the message in `msg` if the communicator has failed, else 0.
int ltx_a2a_error(int comm, char* msg, int msg_len);
}
