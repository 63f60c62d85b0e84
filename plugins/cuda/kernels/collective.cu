/*
 * collective.cu - all_reduce through peer memory, for the small sums of
 * tensor-parallel decode (host side: plugins/cuda/p2p.c; docs/nccl.md).
 *
 * One shot, one barrier: block b of rank r copies its 16-byte units of `in`
 * into slot r of every other rank's mailbox (stores over NVLink), raises
 * its flag there, waits for every other rank's flag of block b in its own
 * mailbox, then sums the units of every rank in rank order, in float, into
 * `out`. Every rank adds the same values in the same order, so every rank
 * gets the same bits. Flags hold a per-block call count, so they are never
 * reset, and slots alternate between two parities: a rank can be at most
 * one call ahead of another (it cannot finish call c+1 before the other has
 * started it, which the other does only after it finished reading call c).
 */
#include "common.cuh"

__device__ __forceinline__ void store_release_sys(uint32_t *flag, uint32_t value) {
  asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(flag), "r"(value) : "memory");
}

__device__ __forceinline__ uint32_t load_acquire_sys(const uint32_t *flag) {
  uint32_t value;
  asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(value) : "l"(flag) : "memory");
  return value;
}

__device__ __forceinline__ uint64_t global_ns() {
  uint64_t ns;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(ns));
  return ns;
}

/* The flag that rank `sender` raises for block `block` in a mailbox. */
__device__ __forceinline__ uint32_t *p2p_flag(uint64_t mailbox, uint32_t sender, uint32_t block) {
  return ptr_at<uint32_t>(mailbox, (int64_t)sender * GK_P2P_MAX_BLOCKS + block);
}

__device__ __forceinline__ uint32_t *p2p_counter(uint64_t mailbox, uint32_t block) {
  return ptr_at<uint32_t>(mailbox, (int64_t)GK_P2P_MAX_RANKS * GK_P2P_MAX_BLOCKS + block);
}

__device__ __forceinline__ uint4 *p2p_slot(uint64_t mailbox, uint32_t parity, uint32_t sender, uint32_t ranks) {
  return ptr_at<uint4>(mailbox + GK_P2P_HEADER_BYTES, ((int64_t)parity * ranks + sender) * (GK_P2P_MAX_BYTES / 16));
}

/* Until the flag reaches `target` (counts wrap), or the timeout passes:
 * then the error word says so and the sum goes on with what is there. */
__device__ __forceinline__ void wait_for_flag(const uint32_t *flag, uint32_t target, uint64_t error_flag) {
  const uint64_t start = global_ns();
  while ((int32_t)(load_acquire_sys(flag) - target) < 0) {
    if (global_ns() - start > GK_P2P_TIMEOUT_NS) {
      raise_error(error_flag, GK_ERROR_COLLECTIVE);
      return;
    }
  }
}

/* The elements [first, first + 16 bytes) of a tensor of n, zeros past n. */
template <class T> __device__ __forceinline__ uint4 load_unit(uint64_t base, int64_t first, int64_t n, int vec) {
  if (vec) return *ptr_at<const uint4>(base, first / vec16<T>::elems);
  union {
    uint4 u;
    T e[vec16<T>::elems];
  } unit = {make_uint4(0, 0, 0, 0)};
#pragma unroll
  for (int i = 0; i < vec16<T>::elems; i++)
    if (first + i < n) unit.e[i] = *ptr_at<const T>(base, first + i);
  return unit.u;
}

template <class T> __device__ __forceinline__ void store_unit(uint64_t base, int64_t first, int64_t n, int vec,
                                                              const float *v) {
  if (vec) {
    store16(ptr_at<T>(base, first), v);
    return;
  }
#pragma unroll
  for (int i = 0; i < vec16<T>::elems; i++)
    if (first + i < n) store1(ptr_at<T>(base, first + i), v[i]);
}

template <class T> __device__ void all_reduce_impl(const cuda_all_reduce_params &p) {
  constexpr int E = vec16<T>::elems;
  const uint32_t block = blockIdx.x;
  const int64_t unit = (int64_t)block * GK_P2P_THREADS + threadIdx.x;
  const int64_t first = unit * E;
  const bool mine = first < p.n;
  const uint64_t own_mailbox = p.mailboxes[p.rank];
  const uint32_t calls = *p2p_counter(own_mailbox, block);
  const uint32_t parity = calls & 1, target = calls + 1;
  uint4 own = make_uint4(0, 0, 0, 0);
  if (mine) {
    own = load_unit<T>(p.in, first, p.n, p.vec);
    for (uint32_t r = 0; r < p.ranks; r++)
      if (r != p.rank) p2p_slot(p.mailboxes[r], parity, p.rank, p.ranks)[unit] = own;
  }
  __syncthreads();
  /* Thread r raises this block's flag at rank r, then waits for rank r's.
   * The barrier orders the block's stores before the release, which is
   * cumulative: whoever sees the flag sees them. */
  if (threadIdx.x < p.ranks && threadIdx.x != p.rank) {
    store_release_sys(p2p_flag(p.mailboxes[threadIdx.x], p.rank, block), target);
    wait_for_flag(p2p_flag(own_mailbox, threadIdx.x, block), target, p.error_flag);
  }
  __syncthreads();
  if (mine) {
    float sum[E], v[E];
    for (uint32_t r = 0; r < p.ranks; r++) {
      const uint4 u = r == p.rank ? own : __ldcv(&p2p_slot(own_mailbox, parity, r, p.ranks)[unit]);
      unpack16((T *)nullptr, u, v);
#pragma unroll
      for (int i = 0; i < E; i++) sum[i] = r == 0 ? v[i] : sum[i] + v[i];
    }
    store_unit<T>(p.out, first, p.n, p.vec, sum);
  }
  if (threadIdx.x == 0) *p2p_counter(own_mailbox, block) = target;
}

GK_FLOAT_KERNELS(all_reduce, all_reduce_impl, cuda_all_reduce_params, __launch_bounds__(GK_P2P_THREADS))
