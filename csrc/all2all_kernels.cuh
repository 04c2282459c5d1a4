// Device side of the peer-to-peer all-to-all: the send/barrier kernel and the copy-out kernel.
// Included once, by all2all.cu (which documents the protocol); kept apart to keep files short.
#pragma once

#include <cuda_runtime.h>

#include "all2all.h"

namespace ltx_a2a {
namespace {

constexpr int kThreads = 512;
constexpr int kUnroll = 4;
constexpr unsigned kPollMask = 1023;  // check the clock and the dead flag every 1024 polls

__device__ __forceinline__ unsigned LoadAcquireSys(const unsigned* p) {
  unsigned v;
  asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

__device__ __forceinline__ void AddReleaseSys(unsigned* p, unsigned v) {
  asm volatile("red.release.sys.global.add.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

__device__ __forceinline__ unsigned long long GlobalTimerNs() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__device__ __forceinline__ int BlocksPerTarget(const GroupView& g, int target) {
  return g.nblocks / g.n + (target < g.nblocks % g.n ? 1 : 0);
}

// The first failure a process sees in a group is recorded in its record; every rank is then marked
// dead, in its own control block, so the ranks of other processes stop too.
__device__ void Fail(const GroupView& g, int kind, int rank, int peer, int ordinal, unsigned expected, unsigned got) {
  if (atomicCAS_system(g.claim, 0u, 1u) == 0u) {
    volatile ErrorRecord* e = g.error;
    e->kind = kind;
    e->rank = rank;
    e->peer = peer;
    e->device = ordinal;
    e->expected = expected;
    e->got = got;
    __threadfence_system();
    e->flag = 1;
  }
  for (int r = 0; r < g.n; ++r) atomicExch_system(&g.control[r]->dead, 1u);
}

// A rank that finds its group dead records that, unless this process already recorded a failure
// (its own, which came first): with one process per GPU the process that failed may be another.
__device__ void NoteDead(const GroupView& g, int rank, int ordinal) {
  if (atomicCAS_system(g.claim, 0u, 1u) == 0u) {
    volatile ErrorRecord* e = g.error;
    e->kind = kPeerFailed;
    e->rank = rank;
    e->peer = -1;
    e->device = ordinal;
    e->expected = 0;
    e->got = 0;
    __threadfence_system();
    e->flag = 1;
  }
}

__device__ bool RankIsValid(const GroupView& g, int rank, int ordinal) {
  return rank >= 0 && rank < g.n && ((g.local >> rank) & 1u) && g.ordinal[rank] == ordinal;
}

template <typename U>
__device__ void CopyChunk(const GroupView& g, const Geometry& geo, int rank, int target, unsigned seq,
                          const char* __restrict__ x) {
  const unsigned units_per_row = static_cast<unsigned>(geo.row_bytes / sizeof(U));
  const unsigned total = static_cast<unsigned>(geo.rows) * units_per_row;
  const unsigned stride = static_cast<unsigned>(BlocksPerTarget(g, target)) * blockDim.x;
  char* slot = g.slots[target] + (seq & 1u) * g.slot_bytes;
  const char* src0 = x + target * geo.hi_src_step;
  char* dst0 = slot + rank * geo.hi_dst_step;
  for (unsigned base = (blockIdx.x / g.n) * blockDim.x + threadIdx.x; base < total; base += stride * kUnroll) {
    U v[kUnroll];
    char* dst[kUnroll];
#pragma unroll
    for (int j = 0; j < kUnroll; ++j) {
      const unsigned u = base + j * stride;
      dst[j] = nullptr;
      if (u < total) {
        const unsigned row = u / units_per_row, col = u - row * units_per_row;
        const unsigned q = row % geo.q, lo_row = row / geo.q;
        const unsigned i = lo_row % geo.lo_chunk, p = lo_row / geo.lo_chunk;
        const unsigned long long src_row = (p * geo.lo_in + target * geo.lo_src_step + i) * geo.q + q;
        const unsigned long long dst_row = (p * geo.lo_out + rank * geo.lo_dst_step + i) * geo.q + q;
        v[j] = __ldg(reinterpret_cast<const U*>(src0 + src_row * geo.hi_in_bytes) + col);
        dst[j] = dst0 + dst_row * geo.hi_out_bytes + col * sizeof(U);
      }
    }
#pragma unroll
    for (int j = 0; j < kUnroll; ++j)
      if (dst[j] != nullptr) *reinterpret_cast<U*>(dst[j]) = v[j];
  }
}

// Block 0, thread s < n: wait for source s's blocks of this exchange, or fail after the timeout.
__device__ void WaitForSources(const GroupView& g, int rank, int ordinal, unsigned seq) {
  const int s = threadIdx.x;
  if (s >= g.n) return;
  Control* me = g.control[rank];
  const unsigned expected = (seq + 1u) * static_cast<unsigned>(BlocksPerTarget(g, rank));
  const unsigned long long start = GlobalTimerNs();
  for (unsigned polls = 0;; ++polls) {
    const unsigned got = LoadAcquireSys(&me->arrive[s]);
    if (static_cast<int>(got - expected) >= 0) return;
    if ((polls & kPollMask) == kPollMask) {
      if (*reinterpret_cast<volatile unsigned*>(&me->dead)) return NoteDead(g, rank, ordinal);
      if (GlobalTimerNs() - start > g.timeout_ns) {
        Fail(g, kTimeout, rank, s, ordinal, expected, got);
        return;
      }
    }
  }
}

template <typename U>
__global__ void __launch_bounds__(kThreads) SendKernel(GroupView g, const int* rank_ptr, int ordinal,
                                                       const char* __restrict__ x, Geometry geo) {
  __shared__ int skip;
  __shared__ unsigned seq;
  const int rank = *rank_ptr;
  if (threadIdx.x == 0) {
    skip = 1;
    if (!RankIsValid(g, rank, ordinal)) {
      Fail(g, kBadRank, rank, -1, ordinal, 0, 0);
    } else {
      skip = *reinterpret_cast<volatile unsigned*>(&g.control[rank]->dead) != 0;
      seq = *reinterpret_cast<volatile unsigned*>(&g.control[rank]->seq);
      if (skip) NoteDead(g, rank, ordinal);
    }
  }
  __syncthreads();
  if (skip) return;
  const int target = blockIdx.x % g.n;
  CopyChunk<U>(g, geo, rank, target, seq, x);
  __threadfence_system();
  __syncthreads();
  if (threadIdx.x == 0) AddReleaseSys(&g.control[target]->arrive[rank], 1u);
  if (blockIdx.x == 0) WaitForSources(g, rank, ordinal, seq);
}

template <typename U>
__global__ void __launch_bounds__(kThreads) FinishKernel(GroupView g, const int* rank_ptr, int ordinal,
                                                         char* __restrict__ out, unsigned long long out_bytes) {
  __shared__ int dead;
  __shared__ unsigned seq;
  const int rank = *rank_ptr;
  const bool valid = RankIsValid(g, rank, ordinal);
  if (threadIdx.x == 0 && valid) {
    dead = *reinterpret_cast<volatile unsigned*>(&g.control[rank]->dead) != 0;
    seq = *reinterpret_cast<volatile unsigned*>(&g.control[rank]->seq);
    if (dead && blockIdx.x == 0) NoteDead(g, rank, ordinal);
  }
  __syncthreads();
  U poison;
  memset(&poison, 0xff, sizeof(U));  // all-ones bytes: NaN in every floating dtype
  const U* src = valid ? reinterpret_cast<const U*>(g.slots[rank] + (seq & 1u) * g.slot_bytes) : nullptr;
  U* dst = reinterpret_cast<U*>(out);
  const unsigned long long units = out_bytes / sizeof(U);
  for (unsigned long long u = blockIdx.x * blockDim.x + threadIdx.x; u < units; u += gridDim.x * blockDim.x)
    dst[u] = (!valid || dead) ? poison : src[u];
  if (!valid) return;
  __syncthreads();
  if (threadIdx.x == 0) {
    Control* me = g.control[rank];
    __threadfence();
    if (atomicAdd(&me->done, 1u) == gridDim.x - 1) {  // last block: every block has read seq
      me->done = 0;
      atomicAdd(&me->seq, 1u);
    }
  }
}

}  // namespace
}  // namespace ltx_a2a
