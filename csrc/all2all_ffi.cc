// XLA FFI handlers for the peer-to-peer all-to-all (all2all.cu). Loaded with ctypes and registered
// from ltx_jax/ffi/all2all.py as the CUDA targets "ltx_all_to_all" and "ltx_all_to_all_graph".
#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <vector>

#include "all2all.h"
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace {

ffi::Error AllToAll(cudaStream_t stream, int32_t ordinal, ffi::AnyBuffer x, ffi::Buffer<ffi::S32> rank,
                    ffi::Result<ffi::AnyBuffer> out, int64_t comm, int64_t n, int64_t split_axis,
                    int64_t concat_axis) {
  if (rank.element_count() != 1) {
    return ffi::Error::InvalidArgument("rank must be a scalar (lax.axis_index), got " +
                                       std::to_string(rank.element_count()) + " elements");
  }
  if (out->element_type() != x.element_type() || out->size_bytes() != x.size_bytes()) {
    return ffi::Error::InvalidArgument("the output must have x's dtype and element count");
  }
  const auto dims = x.dimensions();
  const std::vector<long long> shape(dims.begin(), dims.end());
  ltx_a2a::Geometry geo;
  const int elem_bytes = static_cast<int>(x.size_bytes() / std::max<size_t>(x.element_count(), 1));
  std::string why = ltx_a2a::MakeGeometry(static_cast<int>(n), static_cast<int>(shape.size()), shape.data(),
                                          static_cast<int>(split_axis), static_cast<int>(concat_axis), elem_bytes,
                                          &geo);
  if (!why.empty()) return ffi::Error::InvalidArgument(why);
  if (x.element_count() == 0) return ffi::Error::Success();
  why = ltx_a2a::Launch(static_cast<int>(comm), ordinal, rank.typed_data(), x.untyped_data(), out->untyped_data(),
                        geo, stream);
  if (!why.empty()) return ffi::Error::Internal(why);
  return ffi::Error::Success();
}

}  // namespace

#define LTX_A2A_BINDING                                  \
  ffi::Ffi::Bind()                                       \
      .Ctx<ffi::PlatformStream<cudaStream_t>>() /* stream */ \
      .Ctx<ffi::DeviceOrdinal>()         /* the stream's GPU */ \
      .Arg<ffi::AnyBuffer>()             /* x */         \
      .Arg<ffi::Buffer<ffi::S32>>()      /* rank: lax.axis_index, a scalar */ \
      .Ret<ffi::AnyBuffer>()             /* out */       \
      .Attr<int64_t>("comm")             /* communicator id */ \
      .Attr<int64_t>("n")                /* ranks in the group */ \
      .Attr<int64_t>("split_axis")                       \
      .Attr<int64_t>("concat_axis")

// Default target: not command-buffer compatible, so the host-side check of a recorded failure runs
// on every call and the next exchange after a timeout raises in Python.
XLA_FFI_DEFINE_HANDLER_SYMBOL(LtxAllToAll, AllToAll, LTX_A2A_BINDING);

// Graph-capturable: every address the kernels use is persistent and the slot parity lives in device
// memory, so replays are correct; but a failure then only shows as NaN outputs and through
// ltx_jax.ffi.check_errors(), because replays skip the host-side check.
XLA_FFI_DEFINE_HANDLER_SYMBOL(LtxAllToAllGraph, AllToAll, LTX_A2A_BINDING,
                              {ffi::Traits::kCmdBufferCompatible});
