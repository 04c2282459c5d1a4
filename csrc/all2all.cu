// Peer-to-peer all-to-all: kernels, communicators and launch. Protocol (per exchange, per rank r):
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
// returns; it never traps, so the CUDA context survives and the host reports the error.
#include <cuda_runtime.h>

#include <algorithm>
#include <deque>
#include <memory>
#include <mutex>
#include <sstream>
#include <vector>

#include "all2all.h"
#include "all2all_kernels.cuh"

namespace ltx_a2a {
namespace {

struct Comm {
  int id = -1;
  std::vector<GroupView> groups;
  ErrorRecord* error = nullptr;  // host address; the device address is in each GroupView
  double timeout_s = 0;
};

std::mutex registry_mutex;
std::deque<std::unique_ptr<Comm>> registry;  // never shrinks: captured CUDA graphs keep the addresses

Comm* FindComm(int id) {
  std::lock_guard<std::mutex> lock(registry_mutex);
  return id >= 0 && id < static_cast<int>(registry.size()) ? registry[id].get() : nullptr;
}

std::string CudaError(const char* what, cudaError_t err) {
  return std::string(what) + ": " + cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")";
}

#define A2A_CHECK(call)                                        \
  do {                                                         \
    cudaError_t err_ = (call);                                 \
    if (err_ != cudaSuccess) return CudaError(#call, err_);    \
  } while (0)

std::string EnablePeerAccess(int from, int to) {
  int can = 0;
  A2A_CHECK(cudaDeviceCanAccessPeer(&can, from, to));
  if (!can) {
    return "GPU " + std::to_string(from) + " cannot access the memory of GPU " + std::to_string(to) +
           " (no peer-to-peer path); use backend='all_to_all'";
  }
  A2A_CHECK(cudaSetDevice(from));
  cudaError_t err = cudaDeviceEnablePeerAccess(to, 0);
  if (err == cudaErrorPeerAccessAlreadyEnabled) {
    cudaGetLastError();  // XLA may have enabled it already; clear the sticky-free error
    return "";
  }
  A2A_CHECK(err);
  return "";
}

template <typename U>
std::string LoadKernels() {
  cudaFuncAttributes attributes;
  A2A_CHECK(cudaFuncGetAttributes(&attributes, SendKernel<U>));
  A2A_CHECK(cudaFuncGetAttributes(&attributes, FinishKernel<U>));
  return "";
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

std::string AllocateGroup(const int* ordinals, int n, int nblocks, unsigned long long slot_bytes, double timeout_s,
                          ErrorRecord* error_device, GroupView* g) {
  *g = GroupView{};
  g->n = n;
  g->nblocks = nblocks;
  g->slot_bytes = slot_bytes;
  g->timeout_ns = static_cast<unsigned long long>(timeout_s * 1e9);
  g->error = error_device;
  for (int r = 0; r < n; ++r) {
    g->ordinal[r] = ordinals[r];
    for (int s = 0; s < n; ++s) {
      if (ordinals[s] == ordinals[r]) continue;
      std::string why = EnablePeerAccess(ordinals[r], ordinals[s]);
      if (!why.empty()) return why;
    }
    std::string why = LoadAllKernels(ordinals[r]);
    if (!why.empty()) return why;
    char* base = nullptr;
    A2A_CHECK(cudaMalloc(&base, 2 * slot_bytes + sizeof(Control)));
    g->slots[r] = base;
    g->control[r] = reinterpret_cast<Control*>(base + 2 * slot_bytes);
    A2A_CHECK(cudaMemset(g->control[r], 0, sizeof(Control)));
    A2A_CHECK(cudaDeviceSynchronize());
  }
  return "";
}

std::string CreateComm(int groups, int n, const int* ordinals, unsigned long long slot_bytes, int nblocks,
                       double timeout_s, int* id) {
  if (groups < 1 || n < 1 || n > kMaxRanks) {
    return "need groups >= 1 and 1 <= n <= " + std::to_string(kMaxRanks) + ", got groups=" +
           std::to_string(groups) + ", n=" + std::to_string(n);
  }
  if (!(timeout_s > 0)) return "timeout_s must be > 0, got " + std::to_string(timeout_s);
  int count = 0;
  A2A_CHECK(cudaGetDeviceCount(&count));
  for (int i = 0; i < groups * n; ++i) {
    if (ordinals[i] < 0 || ordinals[i] >= count) {
      return "device ordinal " + std::to_string(ordinals[i]) + " is not one of this process's " +
             std::to_string(count) + " GPUs";
    }
  }
  if (nblocks <= 0) A2A_CHECK(cudaDeviceGetAttribute(&nblocks, cudaDevAttrMultiProcessorCount, ordinals[0]));
  nblocks = std::max(nblocks, n);  // every target needs at least one block
  slot_bytes = (std::max(slot_bytes, 1ull) + 255) / 256 * 256;
  int previous = 0;
  A2A_CHECK(cudaGetDevice(&previous));
  auto comm = std::make_unique<Comm>();
  comm->timeout_s = timeout_s;
  A2A_CHECK(cudaHostAlloc(&comm->error, sizeof(ErrorRecord), cudaHostAllocMapped | cudaHostAllocPortable));
  *comm->error = ErrorRecord{};
  ErrorRecord* error_device = nullptr;
  A2A_CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&error_device), comm->error, 0));
  comm->groups.resize(groups);
  for (int gi = 0; gi < groups; ++gi) {
    std::string why = AllocateGroup(ordinals + gi * n, n, nblocks, slot_bytes, timeout_s, error_device,
                                    &comm->groups[gi]);
    if (!why.empty()) return why;
  }
  A2A_CHECK(cudaSetDevice(previous));
  std::lock_guard<std::mutex> lock(registry_mutex);
  comm->id = *id = static_cast<int>(registry.size());
  registry.push_back(std::move(comm));
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
    if (std::find(candidate.ordinal, candidate.ordinal + candidate.n, ordinal) != candidate.ordinal + candidate.n) {
      g = &candidate;
      break;
    }
  if (g == nullptr) return "GPU " + std::to_string(ordinal) + " is in no group of communicator " + std::to_string(comm_id);
  if (geo.out_bytes > g->slot_bytes) {
    return "the exchange needs " + std::to_string(geo.out_bytes) + " bytes per receive slot but communicator " +
           std::to_string(comm_id) + " has " + std::to_string(g->slot_bytes) + "; create it with more max_bytes";
  }
  int current = -1;
  A2A_CHECK(cudaGetDevice(&current));
  if (current != ordinal) A2A_CHECK(cudaSetDevice(ordinal));
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

std::string ErrorMessage(int comm_id) {
  Comm* comm = FindComm(comm_id);
  if (comm == nullptr) return "unknown communicator id " + std::to_string(comm_id);
  volatile ErrorRecord* e = comm->error;
  if (!e->flag) return "";
  std::ostringstream s;
  s << "ltx all-to-all, communicator " << comm_id << ": ";
  const GroupView& g = comm->groups[0];
  if (e->kind == kTimeout) {
    s << "rank " << e->rank << " (GPU " << e->device << ") waited " << comm->timeout_s << " s for rank " << e->peer
      << ", which never arrived (" << e->got << " of " << e->expected << " block signals). Rank " << e->peer
      << " did not launch this exchange or is stuck; the communicator is unusable from now on.";
  } else {
    s << "the rank operand " << e->rank << " is not a rank of this group on GPU " << e->device << " (group GPUs "
      << DeviceList(g) << "); pass lax.axis_index of the exchanged mesh axis. The communicator is unusable.";
  }
  return s.str();
}

}  // namespace ltx_a2a

namespace {
void CopyMessage(const std::string& message, char* out, int len) {
  if (out == nullptr || len <= 0) return;
  const size_t count = std::min(message.size(), static_cast<size_t>(len - 1));
  message.copy(out, count);
  out[count] = '\0';
}
}  // namespace

extern "C" int ltx_a2a_create(int groups, int n, const int* ordinals, unsigned long long slot_bytes, int nblocks,
                              double timeout_s, char* err, int err_len) {
  int id = -1;
  const std::string why = ltx_a2a::CreateComm(groups, n, ordinals, slot_bytes, nblocks, timeout_s, &id);
  CopyMessage(why, err, err_len);
  return why.empty() ? id : -1;
}

extern "C" int ltx_a2a_error(int comm, char* msg, int msg_len) {
  const std::string message = ltx_a2a::ErrorMessage(comm);
  CopyMessage(message, msg, msg_len);
  return message.empty() ? 0 : 1;
}
