// Peer-to-peer all-to-all: launch and errors (kernels: all2all_kernels.cuh; communicators:
// all2all_comm.cu). Protocol (per exchange, per rank r):
//   1. SendKernel: block b serves target t = b % n. It copies x's chunk for t into slot (seq & 1)
//      of rank t, already in the output layout, then adds 1 to t's arrival counter for source r
//      (release, system scope). Block 0 then waits until every source s has added its blocks for
//      this exchange: arrive[s] >= (seq + 1) * blocks_per_target(r) (monotonic counters compared
//      with >=, never ==, so a fast peer's next signal cannot make us miss this one).
//   2. FinishKernel: copies slot (seq & 1) into the XLA output; its last block increments seq.
// Why a slot is never overwritten before it is read: a peer writes slot p again only in exchange
// seq + 2, which it starts after passing the barrier of exchange seq + 1; that barrier needs rank
// r's signal of seq + 1, which r's stream issues only after r's FinishKernel of seq has read slot
// p. Two slots (ping-pong) are therefore enough, with no extra handshake.
// A barrier that waits past the timeout records who waited for whom (host-mapped), marks every
// rank of the group dead (later kernels skip their work and poison outputs with NaN bytes) and
// returns; it never traps, so the CUDA context survives and the host reports the error. The dead
// flags live in each rank's own (peer-visible) control block, so with one process per GPU they
// reach the other processes, whose kernels then record that a peer failed in their own record.
#include <cuda_runtime.h>

#include <algorithm>
#include <sstream>
#include <vector>

#include "all2all.h"
#include "all2all_kernels.cuh"

namespace ltx_a2a {
namespace {

template <typename U>
std::string LoadKernels() {
  cudaFuncAttributes attributes;
  A2A_CHECK(cudaFuncGetAttributes(&attributes, SendKernel<U>));
  A2A_CHECK(cudaFuncGetAttributes(&attributes, FinishKernel<U>));
  return "";
}

template <typename U>
std::string LaunchAs(const GroupView& g, int ordinal, const int* rank, const void* x, void* out, const Geometry& geo,
                     cudaStream_t stream) {
  SendKernel<U><<<g.nblocks, kThreads, 0, stream>>>(g, rank, ordinal, static_cast<const char*>(x), geo);
  A2A_CHECK(cudaGetLastError());
  const unsigned long long units = geo.out_bytes / sizeof(U);
  const int blocks = static_cast<int>(std::min<unsigned long long>((units + kThreads - 1) / kThreads, 4ull * g.nblocks));
  FinishKernel<U><<<std::max(blocks, 1), kThreads, 0, stream>>>(g, rank, ordinal, static_cast<char*>(out),
                                                                 geo.out_bytes);
  A2A_CHECK(cudaGetLastError());
  return "";
}

std::string DeviceList(const GroupView& g) {
  std::ostringstream s;
  for (int r = 0; r < g.n; ++r) s << (r ? ", " : "[") << g.ordinal[r];
  s << "]";
  return s.str();
}

}  // namespace

std::string CudaError(const char* what, cudaError_t err) {
  return std::string(what) + ": " + cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")";
}

// With CUDA's lazy module loading (the default), the first launch of a kernel loads it, and loading
// waits for the kernels running on the device. A rank whose send kernel spins for a peer would then
// block the launch of its own copy-out kernel, and in one process of virtual ranks the peer's launch
// behind it: a deadlock until the timeout. So every kernel is loaded on every device up front.
std::string LoadAllKernels(int ordinal) {
  A2A_CHECK(cudaSetDevice(ordinal));
  for (const std::string& why : {LoadKernels<int4>(), LoadKernels<int2>(), LoadKernels<int>(), LoadKernels<short>(),
                                 LoadKernels<char>()})
    if (!why.empty()) return why;
  return "";
}

std::string MakeGeometry(int n, int ndim, const long long* dims, int split_axis, int concat_axis, int elem_bytes,
                         Geometry* geo) {
  if (split_axis < 0 || split_axis >= ndim || concat_axis < 0 || concat_axis >= ndim || split_axis == concat_axis) {
    return "split_axis " + std::to_string(split_axis) + " and concat_axis " + std::to_string(concat_axis) +
           " must be different axes of a rank-" + std::to_string(ndim) + " array";
  }
  if (dims[split_axis] % n != 0) {
    return "split axis size " + std::to_string(dims[split_axis]) + " is not divisible by the " + std::to_string(n) +
           " ranks";
  }
  const int lo = std::min(split_axis, concat_axis), hi = std::max(split_axis, concat_axis);
  unsigned long long p = 1, q = 1, r = elem_bytes;
  for (int i = 0; i < lo; ++i) p *= dims[i];
  for (int i = lo + 1; i < hi; ++i) q *= dims[i];
  for (int i = hi + 1; i < ndim; ++i) r *= dims[i];
  const unsigned long long d_lo = dims[lo], d_hi = dims[hi];
  Geometry g{};
  g.q = static_cast<unsigned>(q);
  g.lo_in = d_lo;
  g.hi_in_bytes = d_hi * r;
  if (split_axis == hi) {  // heads -> tokens (send_heads): target t takes heads [t*k, (t+1)*k)
    const unsigned long long k = d_hi / n;
    g.lo_chunk = static_cast<unsigned>(d_lo);
    g.lo_out = d_lo * n;
    g.lo_dst_step = d_lo;
    g.hi_out_bytes = g.row_bytes = g.hi_src_step = k * r;
  } else {  // tokens -> heads (gather_heads): target t takes rows [t*c, (t+1)*c)
    const unsigned long long c = d_lo / n;
    g.lo_chunk = static_cast<unsigned>(c);
    g.lo_out = g.lo_src_step = c;
    g.hi_out_bytes = n * d_hi * r;
    g.row_bytes = g.hi_dst_step = d_hi * r;
  }
  g.rows = p * g.lo_chunk * q;
  g.out_bytes = p * d_lo * q * d_hi * r;
  const unsigned long long strides =
      g.row_bytes | g.hi_in_bytes | g.hi_out_bytes | g.hi_src_step | g.hi_dst_step;
  g.unit = 16;
  while (g.unit > 1 && strides % g.unit) g.unit /= 2;
  if (g.rows * (g.row_bytes / g.unit) >= (1ull << 31)) {
    return "one rank's chunk has " + std::to_string(g.rows * g.row_bytes) + " bytes; the kernel indexes < 2^31 units";
  }
  *geo = g;
  return "";
}

std::string Launch(int comm_id, int ordinal, const int* rank, const void* x, void* out, const Geometry& geo,
                   cudaStream_t stream) {
  Comm* comm = FindComm(comm_id);
  if (comm == nullptr) return "unknown communicator id " + std::to_string(comm_id);
  std::string failed = ErrorMessage(comm_id);
  if (!failed.empty()) return failed;
  const GroupView* g = nullptr;
  for (const GroupView& candidate : comm->groups)
    for (int r = 0; r < candidate.n && g == nullptr; ++r)
      if (((candidate.local >> r) & 1u) && candidate.ordinal[r] == ordinal) g = &candidate;
  if (g == nullptr) {
    return "GPU " + std::to_string(ordinal) + " runs no rank of communicator " + std::to_string(comm_id) +
           " in this process";
  }
  if (geo.out_bytes > g->slot_bytes) {
    return "the exchange needs " + std::to_string(geo.out_bytes) + " bytes per receive slot but communicator " +
           std::to_string(comm_id) + " has " + std::to_string(g->slot_bytes) + "; create it with more max_bytes";
  }
  DeviceGuard guard;  // XLA's thread keeps its current device
  A2A_CHECK(cudaSetDevice(ordinal));
  int unit = geo.unit;  // XLA buffers are aligned, but a caller's pointers may not be
  while (unit > 1 && ((reinterpret_cast<uintptr_t>(x) | reinterpret_cast<uintptr_t>(out)) % unit)) unit /= 2;
  switch (unit) {
    case 16: return LaunchAs<int4>(*g, ordinal, rank, x, out, geo, stream);
    case 8: return LaunchAs<int2>(*g, ordinal, rank, x, out, geo, stream);
    case 4: return LaunchAs<int>(*g, ordinal, rank, x, out, geo, stream);
    case 2: return LaunchAs<short>(*g, ordinal, rank, x, out, geo, stream);
    default: return LaunchAs<char>(*g, ordinal, rank, x, out, geo, stream);
  }
}

namespace {

std::string Describe(const ErrorRecord& e, const GroupView& g, double timeout_s) {
  std::ostringstream s;
  if (e.kind == kTimeout) {
    s << "rank " << e.rank << " (GPU " << e.device << ") waited " << timeout_s << " s for rank " << e.peer
      << ", which never arrived (" << e.got << " of " << e.expected << " block signals). Rank " << e.peer
      << " did not launch this exchange or is stuck";
  } else if (e.kind == kPeerFailed) {
    s << "rank " << e.rank << " (GPU " << e.device << ") stopped: another rank of its group (GPUs " << DeviceList(g)
      << ") failed first, and the process that runs that rank reports why";
  } else {
    s << "the rank operand " << e.rank << " is not a rank of this group run by this process on GPU " << e.device
      << " (group GPUs " << DeviceList(g) << "); pass lax.axis_index of the exchanged mesh axis";
  }
  return s.str();
}

}  // namespace

std::string ErrorMessage(int comm_id) {
  Comm* comm = FindComm(comm_id);
  if (comm == nullptr) return "unknown communicator id " + std::to_string(comm_id);
  std::string message;
  for (size_t gi = 0; gi < comm->groups.size(); ++gi) {
    const volatile ErrorRecord* e = comm->errors + gi;
    if (!e->flag) continue;
    const ErrorRecord record{e->flag, e->kind, e->rank, e->peer, e->device, e->expected, e->got};
    message += (message.empty() ? "" : "; ") + Describe(record, comm->groups[gi], comm->timeout_s);
  }
  if (message.empty()) return "";
  return "ltx all-to-all, communicator " + std::to_string(comm_id) + ": " + message +
         ". The communicator is unusable from now on.";
}

}  // namespace ltx_a2a
