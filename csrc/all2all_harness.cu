// Virtual-rank harness: n ranks on ONE GPU (n buffer sets, one stream per rank, running
// concurrently) through the full protocol: offsets, barrier, ping-pong slots, back-to-back
// exchanges with random delays between them, compared byte for byte with a host reference of
// jax.lax.all_to_all(tiled=True). Then the failure paths: a rank that never launches must make its
// peer time out with a message naming both, and a bad rank operand must be reported.
// Exit status 0 only if every check passed. Usage: all2all_harness [--blocks B] [--iters K] [n ...]
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "all2all.h"

namespace {

int failures = 0;

#define CHECK_CUDA(call)                                                                   \
  do {                                                                                     \
    cudaError_t e_ = (call);                                                               \
    if (e_ != cudaSuccess) {                                                               \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
      std::exit(2);                                                                        \
    }                                                                                      \
  } while (0)

void Expect(bool ok, const std::string& what) {
  std::printf("%s %s\n", ok ? "PASS" : "FAIL", what.c_str());
  if (!ok) ++failures;
}

__global__ void SleepKernel(unsigned long long ns) {
  unsigned long long start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  while (now - start < ns);
}

struct Case {
  std::string name;
  std::vector<long long> dims;  // one rank's input
  int split, concat, elem_bytes;
};

// Host reference of lax.all_to_all(tiled=True) for rank r: out[o] = x_s[i] with s = o[c] / m.
std::vector<unsigned char> Reference(const Case& c, int n, int r, const std::vector<std::vector<unsigned char>>& xs) {
  const int nd = static_cast<int>(c.dims.size());
  std::vector<long long> out_dims = c.dims;
  out_dims[c.split] /= n;
  out_dims[c.concat] *= n;
  long long count = 1;
  for (long long d : out_dims) count *= d;
  std::vector<unsigned char> out(count * c.elem_bytes);
  std::vector<long long> o(nd), in(nd);
  for (long long flat = 0; flat < count; ++flat) {
    long long rest = flat;
    for (int a = nd - 1; a >= 0; --a) o[a] = rest % out_dims[a], rest /= out_dims[a];
    const long long m = c.dims[c.concat];
    const int s = static_cast<int>(o[c.concat] / m);
    in = o;
    in[c.concat] -= s * m;
    in[c.split] += r * out_dims[c.split];
    long long src = 0;
    for (int a = 0; a < nd; ++a) src = src * c.dims[a] + in[a];
    std::memcpy(&out[flat * c.elem_bytes], &xs[s][src * c.elem_bytes], c.elem_bytes);
  }
  return out;
}

// K back-to-back exchanges per rank, each rank on its own stream, random sleeps in between.
void RunCase(const Case& c, int n, int blocks, int iters, std::mt19937& rng) {
  long long count = 1;
  for (long long d : c.dims) count *= d;
  const size_t bytes = count * c.elem_bytes;
  std::vector<int> ordinals(n, 0);
  char err[512] = {0};
  const int comm = ltx_a2a_create(1, n, ordinals.data(), bytes, blocks, 10.0, err, sizeof(err));
  if (comm < 0) return Expect(false, c.name + ": create: " + err);
  ltx_a2a::Geometry geo;
  std::string why = ltx_a2a::MakeGeometry(n, static_cast<int>(c.dims.size()), c.dims.data(), c.split, c.concat,
                                          c.elem_bytes, &geo);
  if (!why.empty()) return Expect(false, c.name + ": geometry: " + why);
  std::vector<cudaStream_t> streams(n);
  std::vector<int*> rank_dev(n);
  std::vector<std::vector<std::vector<unsigned char>>> xs(iters, std::vector<std::vector<unsigned char>>(n));
  std::vector<char*> x_dev(iters * n), out_dev(iters * n);
  for (int r = 0; r < n; ++r) {
    CHECK_CUDA(cudaStreamCreateWithFlags(&streams[r], cudaStreamNonBlocking));
    CHECK_CUDA(cudaMalloc(&rank_dev[r], sizeof(int)));
    CHECK_CUDA(cudaMemcpy(rank_dev[r], &r, sizeof(int), cudaMemcpyHostToDevice));
  }
  for (int k = 0; k < iters; ++k)
    for (int r = 0; r < n; ++r) {
      xs[k][r].resize(bytes);
      for (auto& b : xs[k][r]) b = static_cast<unsigned char>(rng());
      CHECK_CUDA(cudaMalloc(&x_dev[k * n + r], bytes));
      CHECK_CUDA(cudaMalloc(&out_dev[k * n + r], bytes));
      CHECK_CUDA(cudaMemcpy(x_dev[k * n + r], xs[k][r].data(), bytes, cudaMemcpyHostToDevice));
      CHECK_CUDA(cudaMemset(out_dev[k * n + r], 0xab, bytes));  // poison: every byte must be written
    }
  SleepKernel<<<1, 1>>>(0);  // load it now: a lazy load later would wait for spinning ranks
  CHECK_CUDA(cudaDeviceSynchronize());
  for (int k = 0; k < iters; ++k)
    for (int r = 0; r < n; ++r) {
      if (rng() % 3 == 0) SleepKernel<<<1, 1, 0, streams[r]>>>(rng() % 200000);
      why = ltx_a2a::Launch(comm, 0, rank_dev[r], x_dev[k * n + r], out_dev[k * n + r], geo, streams[r]);
      if (!why.empty()) return Expect(false, c.name + ": launch: " + why);
    }
  CHECK_CUDA(cudaDeviceSynchronize());
  char msg[512] = {0};
  if (ltx_a2a_error(comm, msg, sizeof(msg))) return Expect(false, c.name + ": " + msg);
  bool exact = true;
  std::vector<unsigned char> got(bytes);
  for (int k = 0; k < iters; ++k)
    for (int r = 0; r < n; ++r) {
      CHECK_CUDA(cudaMemcpy(got.data(), out_dev[k * n + r], bytes, cudaMemcpyDeviceToHost));
      exact = exact && got == Reference(c, n, r, xs[k]);
    }
  Expect(exact, c.name + " n=" + std::to_string(n) + " x" + std::to_string(iters) + " bit-exact (unit " +
                    std::to_string(geo.unit) + " B)");
  for (char* p : x_dev) CHECK_CUDA(cudaFree(p));
  for (char* p : out_dev) CHECK_CUDA(cudaFree(p));
  for (int r = 0; r < n; ++r) {
    CHECK_CUDA(cudaFree(rank_dev[r]));
    CHECK_CUDA(cudaStreamDestroy(streams[r]));
  }
}

// Rank 0 launches, rank 1 never does: rank 0 must time out, name rank 1, poison its output, and
// every later launch on the communicator must fail on the host.
void RunTimeout(int blocks) {
  const std::vector<int> ordinals = {0, 0};
  char err[512] = {0};
  const double timeout_s = 0.5;
  const int comm = ltx_a2a_create(1, 2, ordinals.data(), 1 << 16, blocks, timeout_s, err, sizeof(err));
  if (comm < 0) return Expect(false, std::string("timeout: create: ") + err);
  const std::vector<long long> dims = {1, 16, 4, 32};
  ltx_a2a::Geometry geo;
  ltx_a2a::MakeGeometry(2, 4, dims.data(), 2, 1, 2, &geo);
  int *rank, zero = 0;
  char *x, *out;
  CHECK_CUDA(cudaMalloc(&rank, sizeof(int)));
  CHECK_CUDA(cudaMemcpy(rank, &zero, sizeof(int), cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMalloc(&x, geo.out_bytes));
  CHECK_CUDA(cudaMalloc(&out, geo.out_bytes));
  CHECK_CUDA(cudaMemset(x, 0, geo.out_bytes));
  const auto start = std::chrono::steady_clock::now();
  std::string why = ltx_a2a::Launch(comm, 0, rank, x, out, geo, 0);
  CHECK_CUDA(cudaDeviceSynchronize());
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  char msg[512] = {0};
  const bool failed = ltx_a2a_error(comm, msg, sizeof(msg)) == 1;
  const std::string text = msg;
  std::printf("  message: %s\n  waited %.2f s\n", msg, waited);
  Expect(why.empty() && failed && text.find("rank 0") != std::string::npos &&
             text.find("for rank 1") != std::string::npos,
         "timeout names the waiting rank and the missing peer");
  Expect(waited >= timeout_s && waited < timeout_s + 5, "timeout fires after the configured time, never hangs");
  std::vector<unsigned char> got(geo.out_bytes);
  CHECK_CUDA(cudaMemcpy(got.data(), out, got.size(), cudaMemcpyDeviceToHost));
  bool poisoned = true;
  for (unsigned char b : got) poisoned = poisoned && b == 0xff;
  Expect(poisoned, "the timed-out output is NaN bytes, not stale data");
  Expect(!ltx_a2a::Launch(comm, 0, rank, x, out, geo, 0).empty(), "later exchanges fail on the host");
  Expect(cudaGetLastError() == cudaSuccess, "the CUDA context survives a timeout");

  // A rank operand that is not in the group is reported, not used as an index.
  const int bad_comm = ltx_a2a_create(1, 2, ordinals.data(), 1 << 16, blocks, timeout_s, err, sizeof(err));
  const int five = 5;
  CHECK_CUDA(cudaMemcpy(rank, &five, sizeof(int), cudaMemcpyHostToDevice));
  ltx_a2a::Launch(bad_comm, 0, rank, x, out, geo, 0);
  CHECK_CUDA(cudaDeviceSynchronize());
  ltx_a2a_error(bad_comm, msg, sizeof(msg));
  Expect(std::string(msg).find("rank operand 5") != std::string::npos, std::string("bad rank reported: ") + msg);
  CHECK_CUDA(cudaFree(rank));
  CHECK_CUDA(cudaFree(x));
  CHECK_CUDA(cudaFree(out));
}

}  // namespace

int main(int argc, char** argv) {
  int blocks = 0, iters = 6;
  std::vector<int> ranks;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--blocks") && i + 1 < argc) blocks = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--iters") && i + 1 < argc) iters = std::atoi(argv[++i]);
    else ranks.push_back(std::atoi(argv[i]));
  }
  if (ranks.empty()) ranks = {2, 4, 8};
  std::mt19937 rng(0);
  for (int n : ranks) {
    const std::vector<Case> cases = {
        {"send_heads bf16 (B,T,H,D)", {2, 37, 2LL * n, 64}, 2, 1, 2},
        {"gather_heads bf16 (B,T,H,D)", {2, 37LL * n, 2, 64}, 1, 2, 2},
        {"send_heads stacked qkv (3,B,T,H,D)", {3, 1, 19, 1LL * n, 128}, 3, 2, 2},
        {"send_heads f32 12-byte rows", {3, 5, 1LL * n, 3}, 2, 1, 4},
        {"gather_heads 1-byte rows", {1, 7LL * n, 1, 1}, 1, 2, 1},
        {"split 0 concat 2 (Q>1)", {2LL * n, 3, 4, 8}, 0, 2, 4},
    };
    for (const Case& c : cases) RunCase(c, n, blocks, iters, rng);
  }
  RunTimeout(blocks);
  std::printf("%s: %d failure(s)\n", failures ? "FAILED" : "ALL PASSED", failures);
  return failures ? 1 : 0;
}
