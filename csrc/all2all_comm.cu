// Communicators of the peer-to-peer all-to-all: allocation, peer access, CUDA IPC, registry.
// One process: every rank's allocation is made here and peers are reached through peer access.
// One process per GPU: each process allocates its own ranks and exports CUDA IPC handles (PrepareIpc);
// after Python has swapped them through the jax.distributed key-value store, OpenIpc maps the peers'
// allocations (cudaIpcOpenMemHandle cannot open a handle of its own process, hence the two paths).
// Either way the kernels get the same GroupView. A failed creation frees and closes what it made,
// except buffers whose IPC handles were already published: those are retired (Retire).
#include <cuda_runtime.h>

#include <algorithm>
#include <deque>
#include <mutex>

#include "all2all.h"

namespace ltx_a2a {
namespace {

std::mutex registry_mutex;
std::deque<std::unique_ptr<Comm>> registry;  // never shrinks: captured CUDA graphs keep the addresses

constexpr const char* kSameNodeHint =
    "; every process of a group must run on one node and see all of its GPUs (start them with "
    "jax.distributed.initialize(local_device_ids=[i]), not CUDA_VISIBLE_DEVICES), or use backend='all_to_all'";

bool IsLocal(const GroupView& g, int r) { return (g.local >> r) & 1u; }

int FirstLocal(const GroupView& g) {
  int first = 0;
  while (first < g.n && !IsLocal(g, first)) ++first;
  return first;
}

// Best effort: the caller is already reporting the first failure, later ones are cleared.
void Release(Comm* comm) {
  DeviceGuard guard;
  for (const Mapping& m : comm->mappings) {
    cudaSetDevice(m.ordinal);
    if (m.opened) {
      cudaIpcCloseMemHandle(m.base);
    } else {
      cudaFree(m.base);
    }
  }
  comm->mappings.clear();
  if (comm->errors != nullptr) cudaFreeHost(comm->errors);
  comm->errors = nullptr;
  comm->groups.clear();
  comm->ready = false;
  cudaGetLastError();
}

// For a communicator whose handles peers may have opened: marks every reachable rank of its groups
// dead (peers' waits end at once), closes the handles it opened, and keeps its own allocations, so
// a peer still writing into them never writes into memory this process reuses.
void Retire(Comm* comm) {
  DeviceGuard guard;
  const unsigned dead = 1;
  for (const GroupView& g : comm->groups) {
    for (int r = 0; r < g.n; ++r) {
      if (g.control[r] == nullptr) continue;
      cudaSetDevice(g.ordinal[IsLocal(g, r) ? r : FirstLocal(g)]);
      cudaMemcpy(&g.control[r]->dead, &dead, sizeof(dead), cudaMemcpyHostToDevice);
    }
  }
  for (const Mapping& m : comm->mappings) {
    if (!m.opened) continue;
    cudaSetDevice(m.ordinal);
    cudaIpcCloseMemHandle(m.base);
  }
  comm->mappings.clear();
  comm->groups.clear();
  comm->ready = false;
  cudaGetLastError();
}

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
    cudaGetLastError();  // XLA or an IPC mapping may have enabled it already; not a sticky error
    return "";
  }
  A2A_CHECK(err);
  return "";
}

// Allocates and zeroes the group's local ranks, with peer access between their GPUs.
std::string AllocateGroup(const int* ordinals, const int* owned, Comm* comm, GroupView* g) {
  for (int r = 0; r < g->n; ++r) {
    g->ordinal[r] = ordinals[r];
    if (owned == nullptr || owned[r]) g->local |= 1u << r;
  }
  if (g->local == 0) return "a group has no rank of this process; pass only groups this process takes part in";
  for (int r = 0; r < g->n; ++r) {
    if (!IsLocal(*g, r)) continue;
    for (int s = 0; s < g->n; ++s) {
      if (!IsLocal(*g, s) || ordinals[s] == ordinals[r]) continue;
      std::string why = EnablePeerAccess(ordinals[r], ordinals[s]);
      if (!why.empty()) return why;
    }
    std::string why = LoadAllKernels(ordinals[r]);
    if (!why.empty()) return why;
    char* base = nullptr;
    A2A_CHECK(cudaMalloc(&base, 2 * g->slot_bytes + sizeof(Control)));
    comm->mappings.push_back({ordinals[r], base, false});
    g->slots[r] = base;
    g->control[r] = reinterpret_cast<Control*>(base + 2 * g->slot_bytes);
    A2A_CHECK(cudaMemset(g->control[r], 0, sizeof(Control)));
    A2A_CHECK(cudaDeviceSynchronize());
    if (g->claim == nullptr) g->claim = &g->control[r]->claim;
  }
  return "";
}

// Checks the arguments, resolves the grid and slot size, and allocates the local ranks.
std::string Setup(int groups, int n, const int* ordinals, const int* owned, unsigned long long* slot_bytes,
                  int* nblocks, double timeout_s, Comm* comm) {
  if (groups < 1 || n < 1 || n > kMaxRanks) {
    return "need groups >= 1 and 1 <= n <= " + std::to_string(kMaxRanks) + ", got groups=" +
           std::to_string(groups) + ", n=" + std::to_string(n);
  }
  if (!(timeout_s > 0)) return "timeout_s must be > 0, got " + std::to_string(timeout_s);
  int count = 0, first = -1;
  A2A_CHECK(cudaGetDeviceCount(&count));
  for (int i = 0; i < groups * n; ++i) {
    if (owned != nullptr && !owned[i]) continue;
    if (first < 0) first = ordinals[i];
    if (ordinals[i] < 0 || ordinals[i] >= count) {
      return "device ordinal " + std::to_string(ordinals[i]) + " is not one of this process's " +
             std::to_string(count) + " GPUs";
    }
  }
  if (first < 0) return "no rank belongs to this process";
  if (*nblocks <= 0) A2A_CHECK(cudaDeviceGetAttribute(nblocks, cudaDevAttrMultiProcessorCount, first));
  *nblocks = std::max(*nblocks, n);  // every target needs at least one block
  *slot_bytes = (std::max(*slot_bytes, 1ull) + 255) / 256 * 256;
  comm->timeout_s = timeout_s;
  A2A_CHECK(cudaHostAlloc(&comm->errors, groups * sizeof(ErrorRecord), cudaHostAllocMapped | cudaHostAllocPortable));
  std::fill(comm->errors, comm->errors + groups, ErrorRecord{});
  ErrorRecord* errors_device = nullptr;
  A2A_CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&errors_device), comm->errors, 0));
  comm->groups.assign(groups, GroupView{});
  for (int gi = 0; gi < groups; ++gi) {
    GroupView& g = comm->groups[gi];
    g.n = n;
    g.nblocks = *nblocks;
    g.slot_bytes = *slot_bytes;
    g.timeout_ns = static_cast<unsigned long long>(timeout_s * 1e9);
    g.error = errors_device + gi;
    std::string why = AllocateGroup(ordinals + gi * n, owned == nullptr ? nullptr : owned + gi * n, comm, &g);
    if (!why.empty()) return why;
  }
  return "";
}

// Maps rank s of group g from its handle; every local GPU of the group gets access to it.
std::string OpenRank(Comm* comm, GroupView* g, int s, const cudaIpcMemHandle_t& handle) {
  const int first = FirstLocal(*g);
  A2A_CHECK(cudaSetDevice(g->ordinal[first]));
  void* base = nullptr;
  cudaError_t err = cudaIpcOpenMemHandle(&base, handle, cudaIpcMemLazyEnablePeerAccess);
  if (err != cudaSuccess) {
    cudaGetLastError();
    return CudaError("cudaIpcOpenMemHandle", err) + " for rank " + std::to_string(s) + " (GPU " +
           std::to_string(g->ordinal[s]) + " of another process)" + kSameNodeHint;
  }
  comm->mappings.push_back({g->ordinal[first], static_cast<char*>(base), true});
  cudaPointerAttributes attributes;
  A2A_CHECK(cudaPointerGetAttributes(&attributes, base));
  for (int r = first + 1; r < g->n; ++r) {
    if (!IsLocal(*g, r) || g->ordinal[r] == attributes.device) continue;
    std::string why = EnablePeerAccess(g->ordinal[r], attributes.device);
    if (!why.empty()) return why;
  }
  g->slots[s] = static_cast<char*>(base);
  g->control[s] = reinterpret_cast<Control*>(g->slots[s] + 2 * g->slot_bytes);
  return "";
}

std::string OpenPeers(Comm* comm, const cudaIpcMemHandle_t* handles, const int* ordinals) {
  for (size_t gi = 0; gi < comm->groups.size(); ++gi) {
    GroupView& g = comm->groups[gi];
    for (int s = 0; s < g.n; ++s) {
      if (IsLocal(g, s)) continue;
      g.ordinal[s] = ordinals[gi * g.n + s];  // the peer's own GPU number, for messages only
      std::string why = OpenRank(comm, &g, s, handles[gi * g.n + s]);
      if (!why.empty()) return why;
    }
  }
  return "";
}

int Register(std::unique_ptr<Comm> comm) {
  std::lock_guard<std::mutex> lock(registry_mutex);
  comm->id = static_cast<int>(registry.size());
  registry.push_back(std::move(comm));
  return registry.back()->id;
}

Comm* FindPending(int id) {
  std::lock_guard<std::mutex> lock(registry_mutex);
  if (id < 0 || id >= static_cast<int>(registry.size())) return nullptr;
  Comm* comm = registry[id].get();
  return !comm->ready && !comm->groups.empty() ? comm : nullptr;
}

}  // namespace

Comm* FindComm(int id) {
  std::lock_guard<std::mutex> lock(registry_mutex);
  return id >= 0 && id < static_cast<int>(registry.size()) && registry[id]->ready ? registry[id].get() : nullptr;
}

std::string CreateComm(int groups, int n, const int* ordinals, unsigned long long slot_bytes, int nblocks,
                       double timeout_s, int* id) {
  DeviceGuard guard;
  auto comm = std::make_unique<Comm>();
  std::string why = Setup(groups, n, ordinals, nullptr, &slot_bytes, &nblocks, timeout_s, comm.get());
  if (!why.empty()) {
    Release(comm.get());
    return why;
  }
  comm->ready = true;
  *id = Register(std::move(comm));
  return "";
}

std::string PrepareIpc(int groups, int n, const int* ordinals, const int* owned, unsigned long long* slot_bytes,
                       int* nblocks, double timeout_s, cudaIpcMemHandle_t* handles, int* id) {
  DeviceGuard guard;
  auto comm = std::make_unique<Comm>();
  std::string why = Setup(groups, n, ordinals, owned, slot_bytes, nblocks, timeout_s, comm.get());
  for (int gi = 0; gi < groups && why.empty(); ++gi) {
    const GroupView& g = comm->groups[gi];
    for (int r = 0; r < n && why.empty(); ++r) {
      if (!IsLocal(g, r)) continue;
      cudaError_t err = cudaIpcGetMemHandle(&handles[gi * n + r], g.slots[r]);
      if (err != cudaSuccess) why = CudaError("cudaIpcGetMemHandle", err);
    }
  }
  if (!why.empty()) {
    Release(comm.get());
    return why;
  }
  *id = Register(std::move(comm));
  return "";
}

std::string OpenIpc(int id, const cudaIpcMemHandle_t* handles, const int* ordinals) {
  Comm* comm = FindPending(id);
  if (comm == nullptr) return "no pending communicator " + std::to_string(id) + " (already opened or freed)";
  DeviceGuard guard;
  std::string why = OpenPeers(comm, handles, ordinals);
  if (!why.empty()) {
    Retire(comm);
    return why;
  }
  std::lock_guard<std::mutex> lock(registry_mutex);
  comm->ready = true;
  return "";
}

void AbortIpc(int id, bool published) {
  Comm* comm = FindPending(id);
  if (comm == nullptr) return;
  if (published) {
    Retire(comm);
  } else {
    Release(comm);
  }
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

extern "C" int ltx_a2a_handle_bytes(void) { return static_cast<int>(sizeof(cudaIpcMemHandle_t)); }

extern "C" int ltx_a2a_ipc_prepare(int groups, int n, const int* ordinals, const int* owned,
                                   unsigned long long* slot_bytes, int* nblocks, double timeout_s, char* handles,
                                   char* err, int err_len) {
  int id = -1;
  const std::string why = ltx_a2a::PrepareIpc(groups, n, ordinals, owned, slot_bytes, nblocks, timeout_s,
                                              reinterpret_cast<cudaIpcMemHandle_t*>(handles), &id);
  CopyMessage(why, err, err_len);
  return why.empty() ? id : -1;
}

extern "C" int ltx_a2a_ipc_open(int pending, const char* handles, const int* ordinals, char* err, int err_len) {
  const std::string why =
      ltx_a2a::OpenIpc(pending, reinterpret_cast<const cudaIpcMemHandle_t*>(handles), ordinals);
  CopyMessage(why, err, err_len);
  return why.empty() ? pending : -1;
}

extern "C" void ltx_a2a_ipc_abort(int pending, int published) { ltx_a2a::AbortIpc(pending, published != 0); }

extern "C" int ltx_a2a_error(int comm, char* msg, int msg_len) {
  const std::string message = ltx_a2a::ErrorMessage(comm);
  CopyMessage(message, msg, msg_len);
  return message.empty() ? 0 : 1;
}
