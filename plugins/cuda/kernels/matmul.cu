/*
 * matmul.cu - matmul: out = alpha * a op(b) + beta * out (+ bias).
 *
 *  - gemv_nk / gemv_kn: M = 1 (decode), bound by reading b once; gemv_nk
 *    also divides a by its RMS (the API's a_norm) on the way, and turns
 *    its output by a rope (the API's rope_dim), copies k and v into paged
 *    caches (kv_k_cache) or joins its halves (glu).
 *  - matmul_skinny: f16/bf16, M <= 64 (decode batches), b as [N, K]:
 *    also bound by reading b once; split over K when N is small; up to 16
 *    rows also applies a_norm, rope, kv_k_cache and glu as gemv_nk does.
 *  - matmul_wgmma: f16/bf16 with b as [N, K] on Hopper (sm_90a): warpgroup
 *    MMA from 128-byte-swizzled shared memory fed by TMA, warp-specialized.
 *  - matmul_mma: f16/bf16 on tensor cores (sm_80+), cp.async multi-stage
 *    pipeline, ldmatrix from swizzled shared memory; needs 16-byte aligned
 *    rows (K % 8 == 0 for [N, K], N % 8 == 0 for [K, N]).
 *  - matmul_simt, matmul_simt64: exact f32 arithmetic on CUDA cores for f32
 *    (TF32 would miss the f32 tolerance), for sm_75 and for unaligned
 *    operands; 128 x 128 tiles, or 64 x 64 where those are too few.
 */
#include "mma.cuh"
#include "wgmma.cuh"

/* What the epilogue of an output adds to its product: its old value (used
 * with beta only) and its bias (with has_bias). */
struct epilogue_inputs {
  float old, bias;
};

/* alpha * acc + beta * old + bias: the epilogue of an output... */
__device__ __forceinline__ float epilogue_with(const cuda_matmul_params &p, epilogue_inputs in, float acc) {
  float v = p.alpha * acc;
  if (p.beta != 0.0f) v = fmaf(p.beta, in.old, v);
  if (p.has_bias) v += in.bias;
  return v;
}

/* ... of output col, whose old value is given (bias is bias_of's). */
template <class T>
__device__ __forceinline__ float epilogue_of(const cuda_matmul_params &p, float old, const T *bias, int64_t col,
                                             float acc) {
  return epilogue_with(p, {old, bias ? to_f32(bias[col]) : 0.0f}, acc);
}

/* Output col's epilogue inputs, its old value read from *old: gemv_nk loads
 * them before its weights, so that their latency hides behind the weights'
 * (read after them, the residual cost the 4096 x 4096 GEMV 0.5 us of 11.1
 * on an H200)... */
template <class T>
__device__ __forceinline__ epilogue_inputs epilogue_inputs_of(const cuda_matmul_params &p, const T *old, const T *bias,
                                                              int64_t col) {
  return {p.beta != 0.0f ? to_f32(*old) : 0.0f, bias ? to_f32(bias[col]) : 0.0f};
}

/* ... and its epilogue with them. */
template <class T>
__device__ __forceinline__ float epilogue(const cuda_matmul_params &p, const T *old, const T *bias, int64_t col,
                                          float acc) {
  return epilogue_with(p, epilogue_inputs_of(p, old, bias, col), acc);
}

template <class T> __device__ __forceinline__ const T *bias_of(const cuda_matmul_params &p) {
  return p.has_bias ? ptr_at<const T>(p.bias, 0) : nullptr;
}

/* Outputs n and n + 1 of one row (o points at n), those that exist: one
 * 4-byte store where both do and o is aligned for it. */
template <class T>
__device__ __forceinline__ void store_pair_values(const cuda_matmul_params &p, T *o, int64_t n, float v0, float v1) {
  if (n + 1 < p.n && ((uintptr_t)o & 3) == 0) {
    *reinterpret_cast<uint32_t *>(o) = pack2(o, v0, v1);
  } else {
    if (n < p.n) store1(o, v0);
    if (n + 1 < p.n) store1(o + 1, v1);
  }
}

/* The same through the epilogue. */
template <class T>
__device__ __forceinline__ void store_pair(const cuda_matmul_params &p, T *o, const T *bias, int64_t n, float v0,
                                           float v1) {
  const float e0 = n < p.n ? epilogue(p, o, bias, n, v0) : 0.0f;
  const float e1 = n + 1 < p.n ? epilogue(p, o + 1, bias, n + 1, v1) : 0.0f;
  store_pair_values(p, o, n, e0, e1);
}

/* ------------------------------------------------------------------- GEMV */

#define GEMV_WARPS GK_GEMV_NK_OUTPUTS

/* 16 bytes of a stream read once (b, which no one writes while the kernel
 * runs): through the non-coherent path, around L1, which keeps a's rows.
 * The GEMVs and the skinny GEMM read their weights so. */
__device__ __forceinline__ uint4 load_streaming16(const void *p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

/* Words w, w + 32, ... (16 bytes each) of a times those of ROWS rows of b,
 * DEPTH words of each row in flight before any is used, while DEPTH more
 * remain; w moves on. */
template <class T, bool RMS, int ROWS, int DEPTH>
__device__ __forceinline__ void gemv_words(const T *a, const T *const (&b)[ROWS], int64_t words, int64_t &w,
                                           float (&sum)[ROWS], float &ss) {
  constexpr int E = 16 / sizeof(T);
  for (; w + 32 * (DEPTH - 1) < words; w += 32 * DEPTH) {
    uint4 raw[ROWS][DEPTH];
#pragma unroll
    for (int u = 0; u < DEPTH; u++)
#pragma unroll
      for (int r = 0; r < ROWS; r++) raw[r][u] = load_streaming16(b[r] + E * (w + 32 * u));
#pragma unroll
    for (int u = 0; u < DEPTH; u++) {
      float av[E];
      unpack16((T *)nullptr, *reinterpret_cast<const uint4 *>(a + E * (w + 32 * u)), av);
#pragma unroll
      for (int r = 0; r < ROWS; r++) {
        float bv[E];
        unpack16((T *)nullptr, raw[r][u], bv);
#pragma unroll
        for (int i = 0; i < E; i++) sum[r] = fmaf(av[i], bv[i], sum[r]);
      }
      if (RMS)
#pragma unroll
        for (int i = 0; i < E; i++) ss = fmaf(av[i], av[i], ss);
    }
  }
}

/* Words of b a lane keeps in flight, its ROWS rows together: what the
 * kernel's registers hold at its launch bounds (below). 4 at a time left
 * the 4096 x 4096 GEMV at 67% of copy in a decode step; past 8 a plain
 * GEMV costs the occupancy that fills one wave. */
template <class T, int ROWS> __host__ __device__ constexpr int gemv_depth() {
  return sizeof(T) != 2 ? 4 : ROWS == 2 ? 16 : 8;
}

/* One lane's part of a row of a times ROWS rows of b (b is [N, K]), in
 * sum: lanes stride over K in 16-byte words, gemv_depth in flight, then 4,
 * then 1, shared among the rows. With RMS, also its part of the sum of a's
 * squares, in *squares. */
template <class T, bool RMS, int ROWS>
__device__ __forceinline__ void gemv_nk_lane(const cuda_matmul_params &p, const T *a, const T *const (&b)[ROWS],
                                             int lane, float (&sum)[ROWS], float *squares) {
  float ss = 0.0f;
#pragma unroll
  for (int r = 0; r < ROWS; r++) sum[r] = 0.0f;
  if (p.vec) {
    const int64_t words = p.k * (int64_t)sizeof(T) / 16;
    int64_t w = lane;
    gemv_words<T, RMS, ROWS, gemv_depth<T, ROWS>() / ROWS>(a, b, words, w, sum, ss);
    gemv_words<T, RMS, ROWS, 4 / ROWS>(a, b, words, w, sum, ss);
    gemv_words<T, RMS, ROWS, 1>(a, b, words, w, sum, ss);
  } else {
    for (int64_t k = lane; k < p.k; k += 32) {
      const float av = load1(a + k);
#pragma unroll
      for (int r = 0; r < ROWS; r++) sum[r] = fmaf(av, load1(b[r] + k), sum[r]);
      if (RMS) ss = fmaf(av, av, ss);
    }
  }
  *squares = ss;
}

/* A rope's turn of a warp's two outputs (GPT-J pair 2j, 2j + 1 of a head):
 * whether they turn and the angle's factors, loaded before the row's
 * products so that their latency hides behind the weights'. */
struct rope_turn {
  bool turned;
  int32_t position;
  double frequency;
  float cosine, sine;
};

/* The pair j (columns 2j, 2j + 1 of a head) output n takes part in, or -1
 * where n is not turned. */
__device__ __forceinline__ int32_t rope_pair_of(const cuda_matmul_params &p, int64_t n) {
  if (!p.rope_dim || n >= p.rope_columns) return -1;
  const int32_t c = (int32_t)n % p.rope_head_dim; /* 32 bits: a 64-bit % is a long call */
  return c < p.rope_dim ? c / 2 : -1;
}

__device__ __forceinline__ double rope_frequency(const cuda_matmul_params &p, int32_t j) {
  return p.rope_inv_freq ? (double)reinterpret_cast<const float *>(p.rope_inv_freq)[j]
                         : exp2(-(double)j * p.rope_log2_ratio);
}

__device__ __forceinline__ rope_turn rope_turn_of(const cuda_matmul_params &p, int64_t z, int64_t n) {
  rope_turn t = {false, 0, 0.0, 1.0f, 0.0f};
  const int32_t j = rope_pair_of(p, n);
  if (j < 0) return t;
  t.turned = true;
  t.position = reinterpret_cast<const int32_t *>(p.rope_positions)[z];
  t.frequency = rope_frequency(p, j);
  return t;
}

/* Whether output n also goes into a cache (kv_k_cache: k's and v's columns). */
__device__ __forceinline__ bool kv_column(const cuda_matmul_params &p, int64_t n) {
  return p.kv_k_cache && n >= p.kv_first && n < p.kv_first + 2 * (int64_t)p.kv_width && n < p.n;
}

/* Row z's slot where one of a warp's two outputs goes into a cache, else
 * -1: loaded before the row's products, so that its latency hides. */
__device__ __forceinline__ int32_t kv_slot_of(const cuda_matmul_params &p, int64_t z, const int64_t (&n)[2]) {
  return kv_column(p, n[0]) || kv_column(p, n[1]) ? reinterpret_cast<const int32_t *>(p.kv_slots)[z] : -1;
}

/* Output n's element of slot 0 of the k or v cache, or null where n is
 * not one of k's or v's columns. */
template <class T> __device__ __forceinline__ T *kv_slot0_element(const cuda_matmul_params &p, int64_t n) {
  if (!kv_column(p, n)) return nullptr;
  const int64_t c = n - p.kv_first;
  return c < p.kv_width ? ptr_at<T>(p.kv_k_cache, c) : ptr_at<T>(p.kv_v_cache, c - p.kv_width);
}

/* Whether a row's outputs go into the caches at `slot`: not for a negative
 * slot; one past the cache raises kv_append's error bit, as kv_append does. */
__device__ __forceinline__ bool kv_slot_taken(const cuda_matmul_params &p, int32_t slot) {
  if (slot >= p.kv_slot_count) raise_error(p.error_flag, GK_ERROR_KV_APPEND);
  return slot >= 0 && slot < p.kv_slot_count;
}

/* Output n's element of the k or v cache at `slot`, or null. */
template <class T>
__device__ __forceinline__ T *kv_destination(const cuda_matmul_params &p, int32_t slot, int64_t n) {
  T *element = kv_slot0_element<T>(p, n);
  return element && kv_slot_taken(p, slot) ? element + (int64_t)slot * p.kv_width : nullptr;
}

/* The angle's cosine and sine, by every lane (the warp's products are done,
 * and its sums' shuffles hide this), reduced as rope_angle reduces it but
 * with the MUFU's sine and cosine: 2^-21 absolute error on [-pi, pi],
 * against the 2^-8 to 2^-24 rounding of the outputs; sincosf's longer chain
 * cost the block's tail (Nsight, H200: q/k/v 17.1 -> 18.1 us). */
__device__ __forceinline__ void turn_angle(rope_turn &t) {
  if (t.turned) __sincosf(rope_reduced_angle((double)t.position, t.frequency), &t.sine, &t.cosine);
}

/* A rope's turn of a pair of outputs (none where t is not turned). */
__device__ __forceinline__ void turn_pair(const rope_turn &t, float &first, float &second) {
  if (!t.turned) return;
  const float old_first = first;
  first = old_first * t.cosine - second * t.sine;
  second = second * t.cosine + old_first * t.sine;
}

/* The product columns a warp computes: one (ROWS 1: warp w of block x takes
 * 8x + w) or two: a rope's pair 2i, 2i + 1 (i = 8x + w), or with glu gate's
 * column i and its up column i + N/2. A second column may be past N (an odd
 * N), never the first: the grid covers whole warps. */
template <int ROWS>
__device__ __forceinline__ void gemv_nk_columns(const cuda_matmul_params &p, int64_t (&n)[ROWS]) {
  const int64_t i = (int64_t)blockIdx.x * GEMV_WARPS + (threadIdx.x >> 5);
  if (ROWS == 1) n[0] = i;
  else if (p.glu) n[0] = i, n[ROWS - 1] = i + p.n / 2;
  else n[0] = 2 * i, n[ROWS - 1] = 2 * i + 1;
}

/* b is [N, K]: one warp per output (gemv_nk), or per two (gemv_nk_pairs,
 * for a rope's pairs, glu's gate and up, and kv_k_cache: ROWS 2, both
 * rows' words in flight together, so that a pair meets in one lane with no
 * exchange between warps; a kernel of its own, so that the plain GEMV's
 * code stays as lean as before). With a_rms the row's scale comes from the
 * squares each warp sums on the way (a is read by every warp anyway), so
 * normalizing a costs no pass of its own. With kv_k_cache, k's and v's
 * outputs are stored in the caches too. */
template <class T, int ROWS> __device__ void gemv_nk_rows(const cuda_matmul_params &p) {
  const int lane = threadIdx.x & 31;
  const int64_t z = blockIdx.y;
  int64_t n[ROWS];
  gemv_nk_columns<ROWS>(p, n);
  if (n[0] >= (ROWS == 2 && p.glu ? p.n / 2 : p.n)) return;
  rope_turn turn = ROWS == 2 ? rope_turn_of(p, z, n[0]) : rope_turn{};
  int32_t slot = -1;
  if constexpr (ROWS == 2) slot = kv_slot_of(p, z, n);
  const T *b[ROWS];
#pragma unroll
  for (int r = 0; r < ROWS; r++) {
    const int64_t row = n[r] < p.n ? n[r] : n[0]; /* a missing second row reads the first again */
    b[r] = ptr_at<const T>(p.b, z * p.b_batch_stride + row * p.ldb);
  }
  const T *a = ptr_at<const T>(p.a, z * p.a_batch_stride);
  T *out = ptr_at<T>(p.out, z * p.out_batch_stride + n[0]);
  epilogue_inputs addends[ROWS] = {};
  if (lane == 0 && (p.beta != 0.0f || p.has_bias))
#pragma unroll
    for (int r = 0; r < ROWS; r++) /* out's old value is read with beta only: never with glu */
      if (n[r] < p.n) addends[r] = epilogue_inputs_of(p, p.glu ? out : out + (n[r] - n[0]), bias_of<T>(p), n[r]);
  float v[ROWS], squares;
  if (p.a_rms) gemv_nk_lane<T, true, ROWS>(p, a, b, lane, v, &squares);
  else gemv_nk_lane<T, false, ROWS>(p, a, b, lane, v, &squares);
  if (ROWS == 2) turn_angle(turn);
#pragma unroll
  for (int r = 0; r < ROWS; r++) v[r] = warp_sum(v[r]);
  if (p.a_rms) {
    const float scale = rsqrtf(warp_sum(squares) / (float)p.k + p.a_rms_eps);
#pragma unroll
    for (int r = 0; r < ROWS; r++) v[r] *= scale;
  }
  if (lane != 0) return;
#pragma unroll
  for (int r = 0; r < ROWS; r++) v[r] = epilogue_with(p, addends[r], v[r]);
  if (ROWS == 2 && p.glu) {
    store1(out, silu(v[0]) * v[ROWS - 1]);
    return;
  }
  turn_pair(turn, v[0], v[ROWS - 1]);
#pragma unroll
  for (int r = 0; r < ROWS; r++) {
    if (n[r] >= p.n) continue;
    store1(out + (n[r] - n[0]), v[r]);
    T *cache = kv_destination<T>(p, slot, n[r]);
    if (cache) store1(cache, v[r]);
  }
}

template <class T> __device__ void gemv_nk_impl(const cuda_matmul_params &p) { gemv_nk_rows<T, 1>(p); }
template <class T> __device__ void gemv_nk_pairs_impl(const cuda_matmul_params &p) { gemv_nk_rows<T, 2>(p); }

/* b is [K, N]: a block covers 64 outputs; 8 threads x 8 columns each walk
 * 32 interleaved K groups, then the groups are summed in shared memory. */
template <class T> __device__ void gemv_kn_impl(const cuda_matmul_params &p) {
  __shared__ float partial[32][65];
  const int cx = threadIdx.x & 7, kg = threadIdx.x >> 3;
  const int64_t n0 = (int64_t)blockIdx.x * 64 + cx * 8;
  const int64_t z = blockIdx.y;
  const T *a = ptr_at<const T>(p.a, z * p.a_batch_stride);
  const T *b = ptr_at<const T>(p.b, z * p.b_batch_stride);
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  if (p.vec) {
    if (n0 < p.n) {
      for (int64_t k = kg; k < p.k; k += 32) {
        float bv[8];
        load8(b + k * p.ldb + n0, bv);
        const float av = load1(a + k);
#pragma unroll
        for (int i = 0; i < 8; i++) acc[i] = fmaf(av, bv[i], acc[i]);
      }
    }
  } else {
    for (int64_t k = kg; k < p.k; k += 32) {
      const float av = load1(a + k);
#pragma unroll
      for (int i = 0; i < 8; i++)
        if (n0 + i < p.n) acc[i] = fmaf(av, load1(b + k * p.ldb + n0 + i), acc[i]);
    }
  }
#pragma unroll
  for (int i = 0; i < 8; i++) partial[kg][cx * 8 + i] = acc[i];
  __syncthreads();
  if (threadIdx.x < 64) {
    const int64_t n = (int64_t)blockIdx.x * 64 + threadIdx.x;
    float sum = 0.0f;
    for (int g = 0; g < 32; g++) sum += partial[g][threadIdx.x];
    if (n < p.n) {
      T *out = ptr_at<T>(p.out, z * p.out_batch_stride + n);
      store1(out, epilogue(p, out, bias_of<T>(p), n, sum));
    }
  }
}

/* Blocks a multiprocessor, so that a decode projection's warps fit one wave
 * (H200, 132 multiprocessors): the plain GEMV four (64 registers; down's
 * 4096 warps, 29.2 -> 28.5 us against two blocks and 16 words in flight),
 * the pairs three (80 registers; q/k/v's 3072 warps, 16.7 -> 14.6 us:
 * at two blocks they took one and a half waves). */
GK_FLOAT_KERNELS(gemv_nk, gemv_nk_impl, cuda_matmul_params, __launch_bounds__(GEMV_WARPS * 32, 4))
GK_FLOAT_KERNELS(gemv_nk_pairs, gemv_nk_pairs_impl, cuda_matmul_params, __launch_bounds__(GEMV_WARPS * 32, 3))
GK_FLOAT_KERNELS(gemv_kn, gemv_kn_impl, cuda_matmul_params, __launch_bounds__(256))

/* ------------------------------------------------------------ SIMT GEMM */

/* Tile number `bid`'s (m, n): groups of 8 tile-rows walk the n tiles
 * together, so the b panels they share stay in L2. */
__device__ __forceinline__ void tile_of(int64_t bid, int64_t tiles_m, int64_t tiles_n, int64_t *tm, int64_t *tn) {
  const int64_t group = 8 * tiles_n;
  const int64_t first_m = (bid / group) * 8;
  const int64_t rows = tiles_m - first_m < 8 ? tiles_m - first_m : 8;
  *tm = first_m + (bid % group) % rows;
  *tn = (bid % group) / rows;
}

#define SIMT_BK 8

/* BM x BN tiles of 8 x 8 outputs per thread. One k step of a and b in
 * shared memory, k-major (a[k][m], b[k][n]); rows 16 bytes longer than the
 * tile: see store_stage. */
template <int BM, int BN> struct simt_tile {
  static constexpr int threads = BM * BN / 64;
  /* four-element groups each thread loads per k step: BM (BN) rows x 2 */
  static constexpr int a_quads = 2 * BM / threads, b_quads = 2 * BN / threads;
  struct stage {
    float a[SIMT_BK][BM + 4];
    float b[SIMT_BK][BN + 4];
  };
  static_assert(BM % 32 == 0 && BN % 64 == 0, "warps of 4 x 8 threads, 8 x 8 outputs each");
  static_assert(a_quads >= 1 && b_quads >= 1 && threads % 32 == 0, "every thread loads a and b");
};

/* Four consecutive elements at p of which the first `valid` exist, zeros
 * for the rest. V4: groups of four are aligned and lie wholly inside or
 * outside the matrix, so one vector load. */
template <bool V4, class T> __device__ __forceinline__ void load_quad(const T *p, int64_t valid, float v[4]) {
  if (V4) {
    if (valid > 0) {
      load4(p, v);
    } else {
#pragma unroll
      for (int j = 0; j < 4; j++) v[j] = 0.0f;
    }
  } else {
#pragma unroll
    for (int j = 0; j < 4; j++) v[j] = j < valid ? load1(p + j) : 0.0f;
  }
}

/* Outputs n .. n + 3 of one row (o points at n) through the epilogue: one
 * 16-byte store where all four exist and o is aligned for it. */
__device__ __forceinline__ void store_quad(const cuda_matmul_params &p, float *o, const float *bias, int64_t n,
                                           const float v[4]) {
  if (n + 3 < p.n && ((uintptr_t)o & 15) == 0) {
    *reinterpret_cast<float4 *>(o) = make_float4(epilogue(p, o, bias, n, v[0]), epilogue(p, o + 1, bias, n + 1, v[1]),
                                                 epilogue(p, o + 2, bias, n + 2, v[2]),
                                                 epilogue(p, o + 3, bias, n + 3, v[3]));
  } else {
#pragma unroll
    for (int j = 0; j < 4; j++)
      if (n + j < p.n) store1(o + j, epilogue(p, o + j, bias, n + j, v[j]));
  }
}
template <class T>
__device__ __forceinline__ void store_quad(const cuda_matmul_params &p, T *o, const T *bias, int64_t n,
                                           const float v[4]) {
  store_pair(p, o, bias, n, v[0], v[1]);
  store_pair(p, o + 2, bias, n + 2, v[2], v[3]);
}

/* Exact f32 GEMM on CUDA cores. A thread's outputs are rows 4 ty .. 4 ty + 3
 * and the same BM / 2 further, columns likewise from 4 tx and BN / 2, so
 * that every fragment read from shared memory is a 16-byte vector; a warp
 * is 4 x 8 threads (ty, tx), whose reads of a and of b per k touch 64 and
 * 128 contiguous bytes. Stages are double-buffered: the next k step comes
 * from global memory into registers while this step's products run, then
 * goes to the other stage, one barrier per step. Each thread loads groups
 * of four elements along K of a's rows (group q: row q / 2, k 0-3 or 4-7 of
 * the step), of b's the same for [N, K], or four columns of a row of b for
 * [K, N]. Rows of a tile past M (columns past N) load the last row (column)
 * instead: their products only reach outputs that are never stored. */
template <class T, bool V4, int BM, int BN>
__device__ void matmul_simt_tiles(const cuda_matmul_params &p, typename simt_tile<BM, BN>::stage *stage) {
  typedef simt_tile<BM, BN> tile;
  constexpr int B_ROW_QUADS = BN / 4; /* groups in a row of b as [K, N] */
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int ty = (warp / (BN / 64)) * 4 + (lane >> 3), tx = (warp % (BN / 64)) * 8 + (lane & 7);
  const int64_t tiles_m = (p.m + BM - 1) / BM, tiles_n = (p.n + BN - 1) / BN;
  const T *bias = bias_of<T>(p);
  for (int64_t z = blockIdx.y; z < p.batch; z += gridDim.y)
    for (int64_t t = blockIdx.x; t < tiles_m * tiles_n; t += gridDim.x) {
      int64_t tm, tn;
      tile_of(t, tiles_m, tiles_n, &tm, &tn);
      const int64_t m0 = tm * BM, n0 = tn * BN;
      const T *ag[tile::a_quads], *bg[tile::b_quads];
#pragma unroll
      for (int i = 0; i < tile::a_quads; i++) {
        const int q = tid + tile::threads * i;
        ag[i] = ptr_at<const T>(p.a, z * p.a_batch_stride + min(m0 + q / 2, p.m - 1) * p.lda + q % 2 * 4);
      }
#pragma unroll
      for (int i = 0; i < tile::b_quads; i++) {
        const int q = tid + tile::threads * i;
        const int64_t at = p.b_kn ? q / B_ROW_QUADS * p.ldb + n0 + q % B_ROW_QUADS * 4
                                  : min(n0 + q / 2, p.n - 1) * p.ldb + q % 2 * 4;
        bg[i] = ptr_at<const T>(p.b, z * p.b_batch_stride + at);
      }
      const int64_t b_step = p.b_kn ? SIMT_BK * p.ldb : SIMT_BK;
      float ra[tile::a_quads][4], rb[tile::b_quads][4];
      auto load = [&](int64_t k0) {
#pragma unroll
        for (int i = 0; i < tile::a_quads; i++) {
          load_quad<V4>(ag[i], p.k - k0 - (tid + tile::threads * i) % 2 * 4, ra[i]);
          ag[i] += SIMT_BK;
        }
#pragma unroll
        for (int i = 0; i < tile::b_quads; i++) {
          const int q = tid + tile::threads * i;
          const int64_t valid = p.b_kn ? (k0 + q / B_ROW_QUADS < p.k ? p.n - n0 - q % B_ROW_QUADS * 4 : 0)
                                       : p.k - k0 - q % 2 * 4;
          load_quad<V4>(bg[i], valid, rb[i]);
          bg[i] += b_step;
        }
      };
      /* Groups along K go in transposed: a warp's 32 groups are 16 rows x
       * (k 0-3, k 4-7), and the two halves land 4 x (BM + 4) = 16 banks
       * apart (mod 32), so each store hits 32 different banks. */
      auto store_stage = [&](typename tile::stage &s) {
#pragma unroll
        for (int i = 0; i < tile::a_quads; i++) {
          const int q = tid + tile::threads * i;
#pragma unroll
          for (int j = 0; j < 4; j++) s.a[q % 2 * 4 + j][q / 2] = ra[i][j];
        }
#pragma unroll
        for (int i = 0; i < tile::b_quads; i++) {
          const int q = tid + tile::threads * i;
          if (p.b_kn) {
            *reinterpret_cast<float4 *>(&s.b[q / B_ROW_QUADS][q % B_ROW_QUADS * 4]) =
                make_float4(rb[i][0], rb[i][1], rb[i][2], rb[i][3]);
          } else {
#pragma unroll
            for (int j = 0; j < 4; j++) s.b[q % 2 * 4 + j][q / 2] = rb[i][j];
          }
        }
      };

      float acc[8][8];
#pragma unroll
      for (int i = 0; i < 8; i++)
#pragma unroll
        for (int j = 0; j < 8; j++) acc[i][j] = 0.0f;
      load(0);
      store_stage(stage[0]);
      __syncthreads();
      int s = 0;
      for (int64_t k0 = 0; k0 < p.k; k0 += SIMT_BK, s ^= 1) {
        const bool more = k0 + SIMT_BK < p.k;
        if (more) load(k0 + SIMT_BK);
        const typename tile::stage &cur = stage[s];
#pragma unroll
        for (int kk = 0; kk < SIMT_BK; kk++) {
          float av[8], bv[8];
          *reinterpret_cast<float4 *>(av) = *reinterpret_cast<const float4 *>(&cur.a[kk][4 * ty]);
          *reinterpret_cast<float4 *>(av + 4) = *reinterpret_cast<const float4 *>(&cur.a[kk][BM / 2 + 4 * ty]);
          *reinterpret_cast<float4 *>(bv) = *reinterpret_cast<const float4 *>(&cur.b[kk][4 * tx]);
          *reinterpret_cast<float4 *>(bv + 4) = *reinterpret_cast<const float4 *>(&cur.b[kk][BN / 2 + 4 * tx]);
#pragma unroll
          for (int i = 0; i < 8; i++)
#pragma unroll
            for (int j = 0; j < 8; j++) acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
        }
        /* The other stage was last read in the step before, which every
         * thread finished before the barrier that ended it. */
        if (more) store_stage(stage[s ^ 1]);
        __syncthreads();
      }

      T *out = ptr_at<T>(p.out, z * p.out_batch_stride);
#pragma unroll
      for (int i = 0; i < 8; i++) {
        const int64_t m = m0 + 4 * ty + i % 4 + i / 4 * (BM / 2);
        if (m >= p.m) continue;
#pragma unroll
        for (int h = 0; h < 2; h++) {
          const int64_t n = n0 + 4 * tx + h * (BN / 2);
          store_quad(p, out + m * p.ldo + n, bias, n, &acc[i][4 * h]);
        }
      }
    }
}

/* p.vec4 picks the vector loads; both share the block's shared memory. */
template <class T, int BM, int BN> __device__ void matmul_simt_impl(const cuda_matmul_params &p) {
  __shared__ __align__(16) typename simt_tile<BM, BN>::stage stage[2];
  if (p.vec4)
    matmul_simt_tiles<T, true, BM, BN>(p, stage);
  else
    matmul_simt_tiles<T, false, BM, BN>(p, stage);
}

/* gk_matmul_simt_<dtype>: 128 x 128 tiles, two blocks per multiprocessor;
 * gk_matmul_simt64_<dtype>: 64 x 64 tiles, for grids too small to fill the
 * GPU with the former. */
#define GK_SIMT_KERNEL(name, dname, T, TILE, THREADS, BLOCKS)                                         \
  static_assert(simt_tile<TILE, TILE>::threads == THREADS, "host and kernel agree on the block");     \
  GK_ENTRY(__launch_bounds__(THREADS, BLOCKS), gk_##name##_##dname, cuda_matmul_params,               \
           matmul_simt_impl<T, TILE, TILE>(p))
GK_SIMT_KERNEL(matmul_simt, f32, float, GK_MATMUL_SIMT_TILE, GK_MATMUL_SIMT_THREADS, 2)
GK_SIMT_KERNEL(matmul_simt, f16, f16, GK_MATMUL_SIMT_TILE, GK_MATMUL_SIMT_THREADS, 2)
GK_SIMT_KERNEL(matmul_simt, bf16, bf16, GK_MATMUL_SIMT_TILE, GK_MATMUL_SIMT_THREADS, 2)
GK_SIMT_KERNEL(matmul_simt64, f32, float, GK_MATMUL_SIMT64_TILE, GK_MATMUL_SIMT64_THREADS, 6)
GK_SIMT_KERNEL(matmul_simt64, f16, f16, GK_MATMUL_SIMT64_TILE, GK_MATMUL_SIMT64_THREADS, 6)
GK_SIMT_KERNEL(matmul_simt64, bf16, bf16, GK_MATMUL_SIMT64_TILE, GK_MATMUL_SIMT64_THREADS, 6)

/* ------------------------------------------------------- tensor-core GEMM */

template <int BM, int BN, int BK, int WARPS_M, int WARPS_N, int STAGES> struct mma_tile {
  static constexpr int threads = WARPS_M * WARPS_N * 32;
  static constexpr int wm = BM / WARPS_M, wn = BN / WARPS_N;
  static constexpr int mt = wm / 16, nt = wn / 8;
  static constexpr int a_elems = BM * BK, b_elems = BN * BK;
  static constexpr int smem_bytes = STAGES * (a_elems + b_elems) * 2;
  static_assert(nt % 2 == 0, "B fragments load two n-tiles at a time");
};

template <class T, bool KN, int BM, int BN, int BK, int WARPS_M, int WARPS_N, int STAGES>
__device__ void matmul_mma_impl(const cuda_matmul_params &p) {
#if __CUDA_ARCH__ >= 800
  typedef mma_tile<BM, BN, BK, WARPS_M, WARPS_N, STAGES> tile;
  constexpr int A_CHUNKS = BK / 8;  /* 16-byte chunks per row of an a tile */
  constexpr int B_CHUNKS = KN ? BN / 8 : BK / 8;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  T *smem = reinterpret_cast<T *>(smem_raw);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  int64_t tm, tn;
  tile_of(blockIdx.x, (p.m + BM - 1) / BM, (p.n + BN - 1) / BN, &tm, &tn);
  const int64_t m0 = tm * BM, n0 = tn * BN, z = blockIdx.y;
  const T *a = ptr_at<const T>(p.a, z * p.a_batch_stride);
  const T *b = ptr_at<const T>(p.b, z * p.b_batch_stride);
  const int ktiles = (int)((p.k + BK - 1) / BK);

  auto load_stage = [&](int stage, int kt) {
    T *as = smem + stage * (tile::a_elems + tile::b_elems);
    T *bs = as + tile::a_elems;
    const int64_t k0 = (int64_t)kt * BK;
    for (int q = threadIdx.x; q < BM * A_CHUNKS; q += tile::threads) {
      const int r = q / A_CHUNKS, c = q % A_CHUNKS;
      const int64_t m = m0 + r, k = k0 + 8 * c;
      const bool ok = m < p.m && k < p.k;
      cp_async16(as + r * BK + 8 * swizzle<A_CHUNKS>(r, c), ok ? a + m * p.lda + k : a, ok ? 16 : 0);
    }
    for (int q = threadIdx.x; q < BN * BK / 8; q += tile::threads) {
      const int r = q / B_CHUNKS, c = q % B_CHUNKS;
      int64_t offset;
      bool ok;
      if (KN) { /* row r of the tile is k0 + r; chunk c covers n0 + 8c .. */
        ok = k0 + r < p.k && n0 + 8 * c < p.n;
        offset = (k0 + r) * p.ldb + n0 + 8 * c;
      } else { /* row r is n0 + r; chunk c covers k0 + 8c .. */
        ok = n0 + r < p.n && k0 + 8 * c < p.k;
        offset = (n0 + r) * p.ldb + k0 + 8 * c;
      }
      const int pitch = KN ? BN : BK;
      cp_async16(bs + r * pitch + 8 * swizzle<B_CHUNKS>(r, c), ok ? b + offset : b, ok ? 16 : 0);
    }
  };

#pragma unroll
  for (int s = 0; s < STAGES - 1; s++) {
    if (s < ktiles) load_stage(s, s);
    cp_async_commit();
  }

  float acc[tile::mt][tile::nt][4];
#pragma unroll
  for (int i = 0; i < tile::mt; i++)
#pragma unroll
    for (int j = 0; j < tile::nt; j++)
#pragma unroll
      for (int e = 0; e < 4; e++) acc[i][j][e] = 0.0f;

  const int wm0 = (warp / WARPS_N) * tile::wm, wn0 = (warp % WARPS_N) * tile::wn;
  for (int kt = 0; kt < ktiles; kt++) {
    cp_async_wait<STAGES - 2>();
    __syncthreads(); /* stage kt landed; everyone is done with stage kt - 1 */
    if (kt + STAGES - 1 < ktiles) load_stage((kt + STAGES - 1) % STAGES, kt + STAGES - 1);
    cp_async_commit();
    const T *as = smem + (kt % STAGES) * (tile::a_elems + tile::b_elems);
    const T *bs = as + tile::a_elems;
#pragma unroll
    for (int kk = 0; kk < BK / 16; kk++) {
      uint32_t af[tile::mt][4], bfrag[tile::nt][2];
#pragma unroll
      for (int i = 0; i < tile::mt; i++) {
        const int r = wm0 + 16 * i + (lane & 15), c = 2 * kk + (lane >> 4);
        ldmatrix_x4(af[i], as + r * BK + 8 * swizzle<A_CHUNKS>(r, c));
      }
#pragma unroll
      for (int j = 0; j < tile::nt / 2; j++) {
        uint32_t t[4];
        if (KN) {
          const int r = 16 * kk + 8 * ((lane >> 3) & 1) + (lane & 7);
          const int c = (wn0 + 16 * j) / 8 + (lane >> 4);
          ldmatrix_x4_trans(t, bs + r * BN + 8 * swizzle<B_CHUNKS>(r, c));
        } else {
          const int r = wn0 + 16 * j + 8 * (lane >> 4) + (lane & 7);
          const int c = 2 * kk + ((lane >> 3) & 1);
          ldmatrix_x4(t, bs + r * BK + 8 * swizzle<B_CHUNKS>(r, c));
        }
        bfrag[2 * j][0] = t[0];
        bfrag[2 * j][1] = t[1];
        bfrag[2 * j + 1][0] = t[2];
        bfrag[2 * j + 1][1] = t[3];
      }
#pragma unroll
      for (int i = 0; i < tile::mt; i++)
#pragma unroll
        for (int j = 0; j < tile::nt; j++) mma_16816(acc[i][j], af[i], bfrag[j], (T *)nullptr);
    }
  }
  cp_async_wait<0>();

  T *out = ptr_at<T>(p.out, z * p.out_batch_stride);
  const T *bias = bias_of<T>(p);
#pragma unroll
  for (int i = 0; i < tile::mt; i++)
#pragma unroll
    for (int j = 0; j < tile::nt; j++)
#pragma unroll
      for (int h = 0; h < 2; h++) {
        const int64_t m = m0 + wm0 + 16 * i + (lane >> 2) + 8 * h;
        const int64_t n = n0 + wn0 + 8 * j + 2 * (lane & 3);
        if (m >= p.m) continue;
        store_pair(p, out + m * p.ldo + n, bias, n, acc[i][j][2 * h], acc[i][j][2 * h + 1]);
      }
#endif
}

/* 128 x 128 x 32 tiles, 8 warps of 64 x 32, 4 stages (64 KiB of shared memory). */
#define MMA_CONFIG 128, 128, 32, 2, 4, 4
static_assert(mma_tile<MMA_CONFIG>::smem_bytes == GK_MATMUL_MMA_SMEM, "host and kernel agree on shared memory");
static_assert(mma_tile<MMA_CONFIG>::threads == GK_MATMUL_MMA_THREADS, "host and kernel agree on the block");
#define GK_MMA_KERNEL(dname, T, lname, KN)                                        \
  GK_ENTRY(__launch_bounds__(256), gk_matmul_mma_##dname##_##lname, cuda_matmul_params, \
           matmul_mma_impl<T, KN, MMA_CONFIG>(p))
GK_MMA_KERNEL(f16, f16, nk, false)
GK_MMA_KERNEL(f16, f16, kn, true)
GK_MMA_KERNEL(bf16, bf16, nk, false)
GK_MMA_KERNEL(bf16, bf16, kn, true)

/* ------------------------------------------------- skinny GEMM (M <= 64) */

/* What matmul_skinny's fused epilogue needs of global memory, loaded
 * before the K loop so that its latency hides there (loaded in the
 * epilogue, one after another behind the stores, they made a decode
 * batch's q/k/v 12 us slower): each row's position and slot, each column
 * pair's rope frequency (-1: not turned), and the rows' sums of a's
 * squares. */
template <int BM> struct skinny_fusion_data {
  int32_t position[BM], slot[BM];
  double frequency[GK_MATMUL_SKINNY_BN / 2];
  float squares[BM];
};

template <int BM>
__device__ __forceinline__ void load_skinny_fusion_data(const cuda_matmul_params &p, int64_t tile,
                                                        skinny_fusion_data<BM> &d) {
  const int q = threadIdx.x;
  if (q < BM && q < p.m) {
    d.position[q] = p.rope_dim ? reinterpret_cast<const int32_t *>(p.rope_positions)[q] : 0;
    d.slot[q] = p.kv_k_cache ? reinterpret_cast<const int32_t *>(p.kv_slots)[q] : -1;
  }
  if (q < GK_MATMUL_SKINNY_BN / 2) {
    const int32_t j = p.glu ? -1 : rope_pair_of(p, tile * GK_MATMUL_SKINNY_BN + 2 * q);
    d.frequency[q] = j < 0 ? -1.0 : rope_frequency(p, j);
  }
}

/* a_rms: lane's share of the sum of squares of a stage of a (BM rows of
 * KSTEP, CHUNKS 16-byte chunks each): MT chunks of one row, warp w taking
 * rows 2 MT w .. 2 MT w + 2 MT - 1, so that each row is one warp's. */
template <class T, int MT, int CHUNKS, class ChunkAt>
__device__ __forceinline__ void add_stage_squares(const uint4 *stage, ChunkAt chunk_at, int warp, int lane,
                                                  float &squares) {
  static_assert(CHUNKS == 16, "16 lanes' chunks a row");
  const int first = warp * 32 * MT + lane * MT; /* of the stage's chunks, row-major */
#pragma unroll
  for (int e = 0; e < MT; e++) {
    float x[8];
    unpack16((T *)nullptr, stage[chunk_at((first + e) / CHUNKS, (first + e) % CHUNKS)], x);
#pragma unroll
    for (int i = 0; i < 8; i++) squares = fmaf(x[i], x[i], squares);
  }
}

/* The rows' sums into d.squares: the 16 / MT lanes of a row add theirs. */
template <int MT>
__device__ __forceinline__ void store_row_squares(float squares, int warp, int lane,
                                                  skinny_fusion_data<16 * MT> &d) {
  constexpr int LANES = 16 / MT;
#pragma unroll
  for (int o = 1; o < LANES; o <<= 1) squares += __shfl_xor_sync(0xffffffffu, squares, o);
  if (lane % LANES == 0) d.squares[warp * 2 * MT + lane / LANES] = squares;
}

/* glu's output col of a row (out's row) from its gate and up products. */
template <class T>
__device__ __forceinline__ void store_glu_output(const cuda_matmul_params &p, T *row, const T *bias, int64_t col,
                                                 float gate, float up) {
  const int64_t half = p.n / 2;
  store1(row + col, silu(epilogue(p, row, bias, col, gate)) * epilogue(p, row, bias, col + half, up));
}

/* Outputs n and n + 1 of a row (out's row) from their products: the
 * epilogue, a rope's turn of the pair (frequency < 0: not turned) and
 * kv's copies into the caches at `slot`, as gemv_nk_rows does. */
template <class T>
__device__ __forceinline__ void store_turned_pair(const cuda_matmul_params &p, T *row, const T *bias, int64_t col,
                                                  float (&v)[2], double frequency, int32_t position, int32_t slot) {
  const int64_t n[2] = {col, col + 1};
  rope_turn turn = {frequency >= 0.0, position, frequency, 1.0f, 0.0f};
  turn_angle(turn);
#pragma unroll
  for (int e = 0; e < 2; e++)
    if (n[e] < p.n) v[e] = epilogue(p, row + n[e], bias, n[e], v[e]);
  turn_pair(turn, v[0], v[1]);
#pragma unroll
  for (int e = 0; e < 2; e++) {
    if (n[e] >= p.n) continue;
    store1(row + n[e], v[e]);
    T *cache = kv_destination<T>(p, slot, n[e]);
    if (cache) store1(cache, v[e]);
  }
}

/* matmul_skinny's outputs from the accumulators (K summed): scaled by the
 * rows' RMS (a_rms), then store_glu_output or store_turned_pair. */
template <class T, int MT>
__device__ __forceinline__ void skinny_store(const cuda_matmul_params &p, float (&acc)[MT][2][4],
                                             const skinny_fusion_data<16 * MT> &d, int64_t tile, int warp, int g,
                                             int t) {
  constexpr int BN = GK_MATMUL_SKINNY_BN;
  T *out = ptr_at<T>(p.out, 0);
  const T *bias = bias_of<T>(p);
#pragma unroll
  for (int i = 0; i < MT; i++)
#pragma unroll
    for (int h = 0; h < 2; h++) {
      const int r = 16 * i + 8 * h + g;
      if (r >= p.m) continue;
      const float scale = p.a_rms ? rsqrtf(d.squares[r] / (float)p.k + p.a_rms_eps) : 1.0f;
      T *row = out + r * p.ldo;
      if (p.glu) {
        const int64_t col = tile * (BN / 2) + 8 * warp + 2 * t;
#pragma unroll
        for (int e = 0; e < 2; e++)
          if (col + e < p.n / 2)
            store_glu_output(p, row, bias, col + e, scale * acc[i][0][2 * h + e], scale * acc[i][1][2 * h + e]);
        continue;
      }
#pragma unroll
      for (int j = 0; j < 2; j++) {
        const int64_t col = tile * BN + 16 * warp + 8 * j + 2 * t;
        float v[2] = {scale * acc[i][j][2 * h], scale * acc[i][j][2 * h + 1]};
        if (!p.rope_dim && !p.kv_k_cache) {
          store_pair(p, row + col, bias, col, v[0], v[1]);
          continue;
        }
        store_turned_pair(p, row, bias, col, v, d.frequency[8 * warp + 4 * j + t], d.position[r], d.slot[r]);
      }
    }
}

/* Few rows of a (decode batches) against b as [N, K]: the time is reading
 * b once, so b goes from memory straight into mma.sync registers. Each of
 * the 8 warps owns 16 columns (two n8 tiles) and all BM = 16 MT rows; a's
 * rows pass through shared memory, KSTEP of K at a time in two stages
 * (cp.async), so that L2 serves them once per block rather than once per
 * warp. Lane (g, t) = (lane / 4, lane % 4) loads 16 bytes, k0 + 8t ..
 * k0 + 8t + 7, of row g of a tile, so four lanes cover 32 values of k,
 * which feed two m16n8k16 products: the first takes each lane's values 0-3
 * as its k pairs (2t, 2t+1) and (2t+8, 2t+9), the second values 4-7. That
 * is another order of k than memory's, the same for a and for b, so every
 * product is still the dot product of a row and a column. In shared memory
 * the odd rows' 16-byte chunks are XORed with 4, so that the eight lanes of
 * a quarter warp (two rows, four chunks) read eight different bank groups.
 *
 * The fusions of gemv_nk, for decode batches (the kernels _fused): with
 * a_rms each warp squares its 2 MT rows of each stage of a, split blocks
 * leave their rows' sums next to their partial tile, and the outputs are
 * scaled once K is summed. With glu a warp's two n8 tiles are 8 gate
 * columns and their 8 up columns, so that a lane holds each gate and up
 * pair (a block: 64 of act's columns); a rope's pairs (2i, 2i + 1) and
 * kv's columns need nothing of the layout. */
template <class T, int MT, bool FUSED> __device__ void matmul_skinny_impl(const cuda_matmul_skinny_params &P) {
#if __CUDA_ARCH__ >= 800
  constexpr int BM = 16 * MT, BN = GK_MATMUL_SKINNY_BN, STEPS = GK_MATMUL_SKINNY_KSTEP / 32;
  constexpr int CHUNKS = GK_MATMUL_SKINNY_KSTEP / 8; /* 16-byte chunks of a row of a stage */
  __shared__ __align__(16) uint4 a_stage[2][BM * CHUNKS];
  const cuda_matmul_params &p = P.p;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int64_t tile = blockIdx.x, split = blockIdx.y;
  const int64_t half = p.n / 2; /* glu: the up columns' offset */
  const bool glu = FUSED && p.glu, a_rms = FUSED && p.a_rms;
  const int64_t n_warp = glu ? tile * (BN / 2) + 8 * warp : tile * BN + 16 * warp;
  const int64_t k_begin = split * P.k_split, k_end = min(p.k, k_begin + P.k_split);
  const T *a = ptr_at<const T>(p.a, 0), *b_row[2];
#pragma unroll
  for (int j = 0; j < 2; j++) {
    const int64_t n = glu ? n_warp + g + j * half : n_warp + 8 * j + g;
    b_row[j] = (glu ? n_warp + g < half : n < p.n) ? ptr_at<const T>(p.b, n * p.ldb) : nullptr;
  }
  auto chunk_at = [](int r, int c) { return r * CHUNKS + (c ^ ((r & 1) << 2)); };
  auto load_a = [&](int stage, int64_t k0) {
    for (int q = threadIdx.x; q < BM * CHUNKS; q += GK_MATMUL_SKINNY_THREADS) {
      const int r = q / CHUNKS, c = q % CHUNKS;
      const int64_t k = k0 + 8 * c;
      const bool ok = r < p.m && k < k_end;
      cp_async16(&a_stage[stage][chunk_at(r, c)], ok ? a + r * p.lda + k : a, ok ? 16 : 0);
    }
  };
  float acc[MT][2][4];
#pragma unroll
  for (int i = 0; i < MT; i++)
#pragma unroll
    for (int j = 0; j < 2; j++)
#pragma unroll
      for (int e = 0; e < 4; e++) acc[i][j][e] = 0.0f;
  float squares = 0.0f; /* a_rms: see add_stage_squares */
  __shared__ skinny_fusion_data<BM> fusion;
  if (FUSED) load_skinny_fusion_data<BM>(p, tile, fusion);

  const uint4 zero = make_uint4(0, 0, 0, 0);
  load_a(0, k_begin);
  cp_async_commit();
  int stage = 0;
  for (int64_t k0 = k_begin; k0 < k_end; k0 += 32 * STEPS, stage ^= 1) {
    uint4 bv[STEPS][2];
#pragma unroll
    for (int u = 0; u < STEPS; u++) {
      const int64_t k = k0 + 32 * u + 8 * t;
#pragma unroll
      for (int j = 0; j < 2; j++) bv[u][j] = b_row[j] && k < k_end ? load_streaming16(b_row[j] + k) : zero;
    }
    if (k0 + 32 * STEPS < k_end) load_a(stage ^ 1, k0 + 32 * STEPS);
    cp_async_commit();
    cp_async_wait<1>();
    __syncthreads(); /* this stage of a has landed */
    /* while b's loads are on their way: anything between the barriers
     * delays the next pass's loads (there, gate/up took 10% longer) */
    if (a_rms) add_stage_squares<T, MT, CHUNKS>(a_stage[stage], chunk_at, warp, lane, squares);
#pragma unroll
    for (int u = 0; u < STEPS; u++) {
      uint4 av[MT][2];
#pragma unroll
      for (int i = 0; i < MT; i++)
#pragma unroll
        for (int h = 0; h < 2; h++) av[i][h] = a_stage[stage][chunk_at(16 * i + 8 * h + g, 4 * u + t)];
#pragma unroll
      for (int i = 0; i < MT; i++)
#pragma unroll
        for (int j = 0; j < 2; j++) {
          const uint32_t a_lo[4] = {av[i][0].x, av[i][1].x, av[i][0].y, av[i][1].y};
          const uint32_t a_hi[4] = {av[i][0].z, av[i][1].z, av[i][0].w, av[i][1].w};
          const uint32_t b_lo[2] = {bv[u][j].x, bv[u][j].y}, b_hi[2] = {bv[u][j].z, bv[u][j].w};
          mma_16816(acc[i][j], a_lo, b_lo, (T *)nullptr);
          mma_16816(acc[i][j], a_hi, b_hi, (T *)nullptr);
        }
    }
    __syncthreads(); /* everyone is done with this stage before it refills */
  }
  if (a_rms) store_row_squares<MT>(squares, warp, lane, fusion);

  /* f(accumulator pair, row in the tile, column in the block's BN) for each
   * pair of adjacent outputs the lane holds. */
  auto each_pair = [&](auto f) {
#pragma unroll
    for (int i = 0; i < MT; i++)
#pragma unroll
      for (int j = 0; j < 2; j++)
#pragma unroll
        for (int h = 0; h < 2; h++) f(&acc[i][j][2 * h], 16 * i + 8 * h + g, 16 * warp + 8 * j + 2 * t);
  };
  if (FUSED) __syncthreads(); /* fusion's loads and the rows' squares are in */
  if (P.splits > 1) { /* hand the tile to the last split to finish */
    float *partial = ptr_at<float>(P.partial, 0);
    const int64_t slot = (tile * P.splits + split) * GK_MATMUL_SKINNY_SLOT_FLOATS(BM);
    each_pair([&](float *v, int r, int c) {
      *reinterpret_cast<float2 *>(partial + slot + r * BN + c) = make_float2(v[0], v[1]);
    });
    if (a_rms && threadIdx.x < BM) partial[slot + BM * BN + threadIdx.x] = fusion.squares[threadIdx.x];
    if (!last_to_arrive(P.counters, tile, P.splits)) return;
    each_pair([&](float *v, int, int) { v[0] = v[1] = 0.0f; });
    float row_sum = 0.0f; /* a_rms: thread r < BM's row */
    for (int64_t s = 0; s < P.splits; s++) { /* in split order: the same sum every run */
      const int64_t from = (tile * P.splits + s) * GK_MATMUL_SKINNY_SLOT_FLOATS(BM);
      each_pair([&](float *v, int r, int c) {
        const float2 part = __ldcg(reinterpret_cast<const float2 *>(partial + from + r * BN + c));
        v[0] += part.x;
        v[1] += part.y;
      });
      if (a_rms && threadIdx.x < BM) row_sum += __ldcg(partial + from + BM * BN + threadIdx.x);
    }
    if (a_rms) { /* each thread r < BM replaces only the block sum it read itself */
      if (threadIdx.x < BM) fusion.squares[threadIdx.x] = row_sum;
      __syncthreads();
    }
  }
  if constexpr (FUSED) {
    skinny_store<T, MT>(p, acc, fusion, tile, warp, g, t);
  } else {
    T *out = ptr_at<T>(p.out, 0);
    const T *bias = bias_of<T>(p);
    /* beta's old outputs, all asked for before any store: the compiler may
     * not move a load of out past a store to it, so read in the stores'
     * loop they came one memory latency after another at the block's end
     * (o and down add into the residual) */
    float old[MT][2][4] = {};
    if (p.beta != 0.0f)
      each_pair([&](float *v, int r, int c) {
        float *o = &old[0][0][0] + (v - &acc[0][0][0]);
#pragma unroll
        for (int e = 0; e < 2; e++)
          if (r < p.m && tile * BN + c + e < p.n) o[e] = to_f32(out[r * p.ldo + tile * BN + c + e]);
      });
    each_pair([&](float *v, int r, int c) {
      const int64_t n = tile * BN + c;
      const float *o = &old[0][0][0] + (v - &acc[0][0][0]);
      if (r < p.m && n < p.n)
        store_pair_values(p, out + r * p.ldo + n, n, epilogue_of(p, o[0], bias, n, v[0]),
                          n + 1 < p.n ? epilogue_of(p, o[1], bias, n + 1, v[1]) : 0.0f);
    });
  }
#endif
}

/* gk_matmul_skinny_<dtype>_m<BM>: kernels.def lists them f16, bf16 for
 * 16, 32 and 64 rows. The fused ones (a_norm, rope, kv, glu) are kernels
 * of their own, so that the plain one's loop and registers stay as they
 * were, and only for 16 rows: at 32 and 64 a decode step ran 1.5% and 8.7%
 * slower with them than with the plain kernel and the separate calls (H200,
 * docs/performance.md), at 8 and 16 rows 4.4% and 3.5% faster. */
#define GK_SKINNY_KERNEL(dname, T, MT)                                                                 \
  GK_ENTRY(__launch_bounds__(GK_MATMUL_SKINNY_THREADS, 2), gk_matmul_skinny_##dname##_m##MT,             \
           cuda_matmul_skinny_params, matmul_skinny_impl<T, MT, false>(p))
GK_SKINNY_KERNEL(f16, f16, 1)
GK_SKINNY_KERNEL(bf16, bf16, 1)
GK_SKINNY_KERNEL(f16, f16, 2)
GK_SKINNY_KERNEL(bf16, bf16, 2)
GK_SKINNY_KERNEL(f16, f16, 4)
GK_SKINNY_KERNEL(bf16, bf16, 4)
GK_ENTRY(__launch_bounds__(GK_MATMUL_SKINNY_THREADS, 2), gk_matmul_skinny_fused_f16_m1, cuda_matmul_skinny_params,
         matmul_skinny_impl<f16, 1, true>(p))
GK_ENTRY(__launch_bounds__(GK_MATMUL_SKINNY_THREADS, 2), gk_matmul_skinny_fused_bf16_m1, cuda_matmul_skinny_params,
         matmul_skinny_impl<bf16, 1, true>(p))

/* ------------------------------------------------------ Hopper wgmma GEMM */

/* 1 in the sm_90a image of the module, whose matmul_wgmma kernels are real;
 * the host reads it to know whether the driver loaded that image. */
extern "C" __device__ const int gk_wgmma_available =
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    1;
#else
    0;
#endif

#define WG_BM GK_MATMUL_WGMMA_BM
#define WG_BK GK_MATMUL_WGMMA_BK

/* One k16 step of a warpgroup's 64 x BN accumulators. */
template <class T, int BN>
__device__ __forceinline__ void wgmma_step(float (&acc)[BN / 2], uint64_t desc_a, uint64_t desc_b) {
  if constexpr (BN == 128) wgmma_m64n128k16(acc, desc_a, desc_b, (T *)nullptr);
  else wgmma_m64n256k16(acc, desc_a, desc_b, (T *)nullptr);
}

/* The epilogue of a multiplying warpgroup's 64 x BN slice (rows m0..,
 * columns n0..) through shared memory and TMA: alpha and bias applied and
 * rounded as store_pair does, written into `slice_smem` as TMA's 64-column
 * boxes with the 128-byte swizzle (row r's 16-byte chunk c at c ^ (r % 8):
 * the eight rows a warp writes at once fall in different banks), then
 * stored by one thread, box by box; TMA leaves out rows past m and columns
 * past n. Waits first until neither warpgroup reads the ring any more. */
template <class T, int BN>
__device__ __forceinline__ void store_tile_by_tma(const cuda_matmul_tma_params &P, const float (&acc)[BN / 2],
                                                  unsigned char *slice_smem, int64_t m0, int64_t n0, int64_t z,
                                                  int slice, int warp, int lane) {
  const cuda_matmul_params &p = P.p;
  const T *bias = bias_of<T>(p);
  named_barrier_sync(1, 256);
#pragma unroll
  for (int j = 0; j < BN / 8; j++)
#pragma unroll
    for (int h = 0; h < 2; h++) {
      const int row = 16 * warp + (lane >> 2) + 8 * h, col = 8 * j + 2 * (lane & 3);
      const int64_t n = n0 + col;
      const float v0 = n < p.n ? epilogue_of(p, 0.0f, bias, n, acc[4 * j + 2 * h]) : 0.0f;
      const float v1 = n + 1 < p.n ? epilogue_of(p, 0.0f, bias, n + 1, acc[4 * j + 2 * h + 1]) : 0.0f;
      unsigned char *box = slice_smem + (col / 64) * (64 * 128);
      const int chunk = ((col % 64) / 8) ^ (row & 7);
      *reinterpret_cast<uint32_t *>(box + row * 128 + chunk * 16 + (col % 8) * 2) = pack2((T *)nullptr, v0, v1);
    }
  fence_proxy_async(); /* the writes above, before TMA reads them */
  named_barrier_sync(2 + slice, 128);
  if ((threadIdx.x & 127) == 0) {
#pragma unroll
    for (int b = 0; b < BN / 64; b++)
      tma_store_3d(&P.out_map, slice_smem + b * (64 * 128), (int)(n0 + 64 * b), (int)m0, (int)z);
    bulk_store_commit_and_wait_read(); /* the block's memory stays until TMA has read it */
  }
}

/* 128 x BN x 64 tiles (BN = 128 or 256: the host picks the width whose
 * tiles fill the multiprocessors best), three warpgroups: one thread of
 * warpgroup 0 loads with TMA, warpgroups 1 and 2 each multiply 64 rows x BN
 * columns (BN / 2 accumulators per thread). Stage s of the ring holds a
 * (128 x 64) then b (BN x 64), K-major with the 128-byte swizzle (TMA
 * zero-fills past the edges). full[s] completes when a stage's bytes have
 * landed, empty[s] when both multiplying warpgroups are done reading it.
 * With beta = 0 and out describable for TMA, the ring then holds the output
 * tile on its way out (store_tile_by_tma). */
template <class T, int BN> __device__ void matmul_wgmma_impl(const cuda_matmul_tma_params &P) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  const cuda_matmul_params &p = P.p;
  constexpr int STAGES = GK_MATMUL_WGMMA_STAGES(BN);
  constexpr int A_BYTES = WG_BM * WG_BK * 2, B_BYTES = BN * WG_BK * 2;
  constexpr int STAGE_BYTES = A_BYTES + B_BYTES;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  /* The swizzle pattern repeats every 1024 bytes: align the ring to it. */
  unsigned char *ring = smem_raw + ((1024 - (smem_addr(smem_raw) & 1023)) & 1023);
  uint64_t *full = reinterpret_cast<uint64_t *>(ring + STAGES * STAGE_BYTES);
  uint64_t *empty = full + STAGES;
  const int warpgroup = threadIdx.x >> 7, warp = (threadIdx.x >> 5) & 3, lane = threadIdx.x & 31;
  int64_t tm, tn;
  tile_of(blockIdx.x, (p.m + WG_BM - 1) / WG_BM, (p.n + BN - 1) / BN, &tm, &tn);
  const int64_t m0 = tm * WG_BM, n0 = tn * BN, z = blockIdx.y;
  const int ktiles = (int)((p.k + WG_BK - 1) / WG_BK);
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; s++) {
      mbarrier_init(&full[s], 1);
      mbarrier_init(&empty[s], 2);
    }
  }
  __syncthreads();

  if (warpgroup == 0) { /* loader */
    if (threadIdx.x == 0) {
      for (int kt = 0; kt < ktiles; kt++) {
        const int s = kt % STAGES;
        if (kt >= STAGES) mbarrier_wait(&empty[s], ((kt / STAGES) & 1) ^ 1);
        unsigned char *as = ring + s * STAGE_BYTES;
        mbarrier_arrive_expect_tx(&full[s], STAGE_BYTES);
        tma_load_3d(as, &P.a_map, kt * WG_BK, (int)m0, (int)z, &full[s]);
        tma_load_3d(as + A_BYTES, &P.b_map, kt * WG_BK, (int)n0, p.b_batch_stride ? (int)z : 0, &full[s]);
      }
    }
    return;
  }

  const int slice = warpgroup - 1; /* rows 64 slice .. 64 slice + 63 of the tile */
  float acc[BN / 2];
#pragma unroll
  for (int i = 0; i < BN / 2; i++) acc[i] = 0.0f;
  for (int kt = 0; kt < ktiles; kt++) {
    const int s = kt % STAGES;
    mbarrier_wait(&full[s], (kt / STAGES) & 1);
    const unsigned char *as = ring + s * STAGE_BYTES, *bs = as + A_BYTES;
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < WG_BK / 16; kk++)
      wgmma_step<T, BN>(acc, wgmma_descriptor(as + slice * 64 * 128 + 32 * kk), wgmma_descriptor(bs + 32 * kk));
    wgmma_commit();
    wgmma_wait<1>(); /* the previous stage's products are done: hand it back */
    if (kt > 0 && (threadIdx.x & 127) == 0) mbarrier_arrive(&empty[(kt - 1) % STAGES]);
  }
  wgmma_wait<0>();
  if (P.store_by_tma) {
    store_tile_by_tma<T, BN>(P, acc, ring + slice * (64 * BN * 2), m0 + 64 * slice, n0, z, slice, warp, lane);
    return;
  }

  T *out = ptr_at<T>(p.out, z * p.out_batch_stride);
  const T *bias = bias_of<T>(p);
#pragma unroll
  for (int j = 0; j < BN / 8; j++)
#pragma unroll
    for (int h = 0; h < 2; h++) {
      const int64_t m = m0 + 64 * slice + 16 * warp + (lane >> 2) + 8 * h;
      const int64_t n = n0 + 8 * j + 2 * (lane & 3);
      if (m >= p.m) continue;
      store_pair(p, out + m * p.ldo + n, bias, n, acc[4 * j + 2 * h], acc[4 * j + 2 * h + 1]);
    }
#endif
}

#define GK_WGMMA_KERNEL(dname, bn)                                                          \
  GK_ENTRY(__launch_bounds__(GK_MATMUL_WGMMA_THREADS, 1), gk_matmul_wgmma_##dname##_n##bn, \
           __grid_constant__ cuda_matmul_tma_params, matmul_wgmma_impl<dname, bn>(p))
GK_WGMMA_KERNEL(f16, 128)
GK_WGMMA_KERNEL(bf16, 128)
GK_WGMMA_KERNEL(f16, 256)
GK_WGMMA_KERNEL(bf16, 256)

/* --------------------------------------- skinny GEMM with wgmma (sm_90a) */

/* One k16 step of a warpgroup's 64 columns of b x BM rows of a. */
template <class T, int BM>
__device__ __forceinline__ void skinny_wgmma_step(float (&acc)[BM / 2], uint64_t desc_b, uint64_t desc_a) {
  if constexpr (BM == 32) wgmma_m64n32k16_ss(acc, desc_b, desc_a, 1, (T *)nullptr);
  else wgmma_m64n64k16_ss(acc, desc_b, desc_a, 1, (T *)nullptr);
}

/* a_rms: consumer thread q's share of a's squares in a stage of
 * matmul_skinny_wgmma_fused (32 rows of 64, one 128-byte line each, whose
 * 16-byte chunks the swizzle only reorders within the line): chunk q, of
 * row q / 8. */
template <class T>
__device__ __forceinline__ void add_tma_stage_squares(const unsigned char *as, float &squares) {
  float x[8];
  unpack16((T *)nullptr, reinterpret_cast<const uint4 *>(as)[threadIdx.x], x);
#pragma unroll
  for (int i = 0; i < 8; i++) squares = fmaf(x[i], x[i], squares);
}

/* matmul_skinny_wgmma_fused's epilogue, first: the summed tile into shared
 * memory (the ring, which the K loop is done with; rows of BN + 4 floats,
 * so that the accumulators' stores meet in no bank), each row's a_rms
 * scale after it. Returns the scales. */
template <int BM, class EachPair>
__device__ __forceinline__ const float *skinny_wgmma_stage_tile(const cuda_matmul_params &p, float *tile_smem,
                                                                EachPair each_pair, const skinny_fusion_data<BM> &d) {
  constexpr int LD = GK_MATMUL_SKINNY_BN + 4;
  float *scales = tile_smem + BM * LD;
  each_pair([&](float *v, int r, int c) {
    tile_smem[r * LD + c] = v[0];
    tile_smem[(r + 1) * LD + c] = v[1];
  });
  if (threadIdx.x < BM) scales[threadIdx.x] = p.a_rms ? rsqrtf(d.squares[threadIdx.x] / (float)p.k + p.a_rms_eps) : 1.0f;
  named_barrier_sync(1, 256);
  return scales;
}

/* With glu (a gate column's products are warpgroup 0's, its up column's
 * warpgroup 1's): each thread takes outputs of one row at a time, a warp 32
 * neighbours (coalesced stores). The loop is unrolled only 4 deep:
 * unrolled over matmul_skinny's register layout (skinny_store) the 64-row
 * epilogue was 8000 instructions run once each (H200, Nsight Compute). */
template <class T, int BM, class EachPair>
__device__ __forceinline__ void skinny_wgmma_glu_store(const cuda_matmul_params &p, float *tile_smem,
                                                       EachPair each_pair, const skinny_fusion_data<BM> &d,
                                                       int64_t tile) {
  constexpr int BN = GK_MATMUL_SKINNY_BN, LD = BN + 4;
  const float *scales = skinny_wgmma_stage_tile<BM>(p, tile_smem, each_pair, d);
  T *out = ptr_at<T>(p.out, 0);
  const T *bias = bias_of<T>(p);
  const int rows = min(p.m, (int64_t)BM);
#pragma unroll 4
  for (int item = threadIdx.x; item < rows * (BN / 2); item += 256) {
    const int r = item / (BN / 2), q = item % (BN / 2);
    const float *products = tile_smem + r * LD;
    const int64_t col = tile * (BN / 2) + q; /* gate column q and its up column, BN / 2 on */
    if (col < p.n / 2)
      store_glu_output(p, out + r * p.ldo, bias, col, scales[r] * products[q], scales[r] * products[BN / 2 + q]);
  }
}

/* Without glu (a_norm, rope, kv): each thread takes one pair of columns, q
 * = threadIdx.x % 64 of the tile, in every fourth row, a warp 32 pairs of a
 * row (coalesced stores). What depends only on the columns (their bias,
 * the pair's rope frequency, where they go in a cache) is worked out once,
 * so that a row costs its products, the turn and the stores. Through the
 * general per-output helpers (store_turned_pair, kv_destination) a warp ran
 * 1588 instructions here for its 8 pairs, with the block's 8 warps the
 * only ones left on their multiprocessor: q/k/v at 32 rows took 23.7 us
 * against 19.9 with no epilogue at all (H200, decode's 2 splits). */
template <class T, int BM, class EachPair>
__device__ __forceinline__ void skinny_wgmma_fused_store(const cuda_matmul_params &p, float *tile_smem,
                                                         EachPair each_pair, const skinny_fusion_data<BM> &d,
                                                         int64_t tile) {
  constexpr int BN = GK_MATMUL_SKINNY_BN, LD = BN + 4, ROWS_APART = 256 / (BN / 2);
  const float *scales = skinny_wgmma_stage_tile<BM>(p, tile_smem, each_pair, d);
  const int q = threadIdx.x % (BN / 2);
  const int64_t col = tile * BN + 2 * q;
  if (col >= p.n) return;
  const T *bias = bias_of<T>(p);
  const float bias0 = bias ? to_f32(bias[col]) : 0.0f, bias1 = bias && col + 1 < p.n ? to_f32(bias[col + 1]) : 0.0f;
  const double frequency = d.frequency[q];
  T *const cache[2] = {kv_slot0_element<T>(p, col), kv_slot0_element<T>(p, col + 1)};
  T *out = ptr_at<T>(p.out, 0) + col;
  const int rows = min(p.m, (int64_t)BM);
#pragma unroll 4
  for (int r = threadIdx.x / (BN / 2); r < rows; r += ROWS_APART) {
    T *o = out + r * p.ldo;
    const float *products = tile_smem + r * LD + 2 * q;
    float v0 = epilogue_with(p, {p.beta != 0.0f ? to_f32(o[0]) : 0.0f, bias0}, scales[r] * products[0]);
    float v1 = scales[r] * products[1];
    if (col + 1 < p.n) v1 = epilogue_with(p, {p.beta != 0.0f ? to_f32(o[1]) : 0.0f, bias1}, v1);
    rope_turn turn = {frequency >= 0.0, d.position[r], frequency, 1.0f, 0.0f};
    turn_angle(turn);
    turn_pair(turn, v0, v1);
    store_pair_values(p, o, col, v0, v1);
    if ((!cache[0] && !cache[1]) || !kv_slot_taken(p, d.slot[r])) continue;
    const int64_t offset = (int64_t)d.slot[r] * p.kv_width;
    if (cache[0]) store1(cache[0] + offset, v0);
    if (cache[1]) store1(cache[1] + offset, v1);
  }
}

/* The 16-bit value e (0 or 1) of a packed pair, as a float. */
template <class T> __device__ __forceinline__ float old_value(uint32_t pair, int e) {
  const uint16_t bits = (uint16_t)(pair >> (16 * e));
  return to_f32(*reinterpret_cast<const T *>(&bits));
}

/* matmul_skinny's work (decode batches of 17 to 64 rows, b as [N, K]) on
 * Hopper with the operands swapped: b's rows, the weights, are wgmma's M
 * (64 a warpgroup) and a's rows its N (BM = 32 or 64), so that TMA streams
 * b into a ring of stages in shared memory and the tensor cores read it
 * there. matmul_skinny instead loads b into every lane's registers, and at
 * 32 rows issued about 1.8x the instructions a byte of the one-row GEMV
 * (a's fragments, bounds, barriers), holding it near 55-70% of copy.
 * Blocks as matmul_skinny's: GK_MATMUL_SKINNY_BN columns of out (blockIdx.x)
 * and a share of K (blockIdx.y, k_split), the last split to finish summing
 * the partial tiles in split order. Warpgroups 0 and 1 multiply 64 columns
 * each, one thread of the warp after them loads (a warp, not a warpgroup:
 * with two blocks of 384 threads a multiprocessor ptxas held each thread to
 * 80 registers and the 64-row kernel spilled in its K loop; at 288 it has 96
 * and spills 28 bytes, only in the last split's sum). A thread's accumulators
 * hold out's (row, column) = (8 j + 2 (lane % 4) + e, 16 warp + lane / 4 +
 * 8 h) of its warpgroup's 64 columns at acc[4 j + 2 h + e].
 *
 * FUSED (a_norm, rope, kv, glu: matmul_skinny_fused's fusions, kernels of
 * their own so that the plain ones stay as they are; 32 rows only, where
 * they were faster than the separate calls, matmul.c says by how much):
 * each consumer thread squares a chunk of every stage of a
 * (add_tma_stage_squares), split blocks leave their rows' sums after their
 * partial tile, and skinny_wgmma_fused_store (with glu
 * skinny_wgmma_glu_store) applies the fusions once K is summed. With glu a
 * block takes BN / 2 gate columns and their up columns, two TMA boxes of
 * BN / 2 rows of b a stage. */
template <class T, int BM, bool FUSED>
__device__ void matmul_skinny_wgmma_impl(const cuda_matmul_skinny_tma_params &P) {
  static_assert(!FUSED || BM == 32, "fused: 32 rows (a thread's squares are one chunk of a stage)");
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  const cuda_matmul_skinny_params &S = P.s;
  const cuda_matmul_params &p = S.p;
  constexpr int BN = GK_MATMUL_SKINNY_BN, STAGES = GK_MATMUL_SKINNY_WGMMA_STAGES(BM);
  constexpr int B_BYTES = BN * WG_BK * 2, STAGE_BYTES = B_BYTES + BM * WG_BK * 2;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  unsigned char *ring = smem_raw + ((1024 - (smem_addr(smem_raw) & 1023)) & 1023);
  uint64_t *full = reinterpret_cast<uint64_t *>(ring + STAGES * STAGE_BYTES);
  uint64_t *empty = full + STAGES;
  const int warpgroup = threadIdx.x >> 7, warp = (threadIdx.x >> 5) & 3, lane = threadIdx.x & 31;
  const int64_t tile = blockIdx.x, split = blockIdx.y;
  const int k_first = (int)(split * S.k_split / WG_BK);
  const int passes = (int)((min(p.k, (split + 1) * S.k_split) - split * S.k_split + WG_BK - 1) / WG_BK);
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; s++) {
      mbarrier_init(&full[s], 1);
      mbarrier_init(&empty[s], 2);
    }
  }
  __syncthreads();

  if (warpgroup == 2) { /* loader */
    if (threadIdx.x == 256) {
      for (int i = 0; i < passes; i++) {
        const int s = i % STAGES;
        if (i >= STAGES) mbarrier_wait(&empty[s], ((i / STAGES) & 1) ^ 1);
        unsigned char *bs = ring + s * STAGE_BYTES;
        mbarrier_arrive_expect_tx(&full[s], STAGE_BYTES);
        if (FUSED && p.glu) { /* gate's rows, then their up rows (p.n / 2 on) */
          tma_load_3d(bs, &P.b_map, (k_first + i) * WG_BK, (int)(tile * (BN / 2)), 0, &full[s]);
          tma_load_3d(bs + B_BYTES / 2, &P.b_map, (k_first + i) * WG_BK, (int)(p.n / 2 + tile * (BN / 2)), 0,
                      &full[s]);
        } else {
          tma_load_3d(bs, &P.b_map, (k_first + i) * WG_BK, (int)(tile * BN), 0, &full[s]);
        }
        tma_load_3d(bs + B_BYTES, &P.a_map, (k_first + i) * WG_BK, 0, 0, &full[s]);
      }
    }
    return;
  }

  const int slice = warpgroup; /* columns 64 slice .. 64 slice + 63 of the tile */
  const bool a_rms = FUSED && p.a_rms;
  __shared__ skinny_fusion_data<FUSED ? BM : 1> fusion;
  if constexpr (FUSED) load_skinny_fusion_data<BM>(p, tile, fusion);
  float squares = 0.0f; /* a_rms: see add_tma_stage_squares */
  float acc[BM / 2];
#pragma unroll
  for (int i = 0; i < BM / 2; i++) acc[i] = 0.0f;
  const int g = lane >> 2, t = lane & 3;
  /* f(accumulator pair, its first row, column in the tile): the pair is
   * rows r and r + 1 of one column */
  auto each_pair = [&](auto f) {
#pragma unroll
    for (int j = 0; j < BM / 8; j++)
#pragma unroll
      for (int h = 0; h < 2; h++) f(&acc[4 * j + 2 * h], 8 * j + 2 * t, 64 * slice + 16 * warp + g + 8 * h);
  };
  /* beta's old outputs (the residual a projection adds into), a pair's two
   * 16-bit values in one register. At 32 rows every split asks for them
   * before the K loop (the last split to finish may be any) and keeps them
   * as loaded until the epilogue: read after the loop, their trip to memory
   * came on top of the kernel's (o 17.2 -> 16.6 us, H200). The 64-row
   * kernel reads them after its sum: held through it, they made it spill
   * 92 bytes and decode of 64 sequences 9% slower. */
  uint32_t old[BM / 4];
  auto load_old = [&]() {
    if (FUSED || p.beta == 0.0f) return;
    const uint16_t *out = ptr_at<const uint16_t>(p.out, 0);
    each_pair([&](float *v, int r, int c) {
      const int64_t n = tile * BN + c;
      uint32_t pair = 0;
#pragma unroll
      for (int e = 0; e < 2; e++)
        if (r + e < p.m && n < p.n) pair |= (uint32_t)out[(r + e) * p.ldo + n] << (16 * e);
      old[(v - acc) / 2] = pair;
    });
  };
  if constexpr (BM == 32) load_old();
  for (int i = 0; i < passes; i++) {
    const int s = i % STAGES;
    mbarrier_wait(&full[s], (i / STAGES) & 1);
    const unsigned char *bs = ring + s * STAGE_BYTES, *as = bs + B_BYTES;
    /* read before this warp's products are issued, so before the stage can
     * be handed back (that waits for every warp's products) */
    if (a_rms) add_tma_stage_squares<T>(as, squares);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < WG_BK / 16; kk++)
      skinny_wgmma_step<T, BM>(acc, wgmma_descriptor(bs + slice * 64 * 128 + 32 * kk), wgmma_descriptor(as + 32 * kk));
    wgmma_commit();
    wgmma_wait<1>(); /* the previous stage's products are done: hand it back */
    if (i > 0 && (threadIdx.x & 127) == 0) mbarrier_arrive(&empty[(i - 1) % STAGES]);
  }
  wgmma_wait<0>();
  wgmma_fence_registers(acc);
  if constexpr (FUSED) {
    if (a_rms) { /* the 8 threads of a row add theirs */
#pragma unroll
      for (int o = 1; o < 8; o <<= 1) squares += __shfl_xor_sync(0xffffffffu, squares, o);
      if ((threadIdx.x & 7) == 0) fusion.squares[threadIdx.x / 8] = squares;
    }
    named_barrier_sync(1, 256); /* the squares and fusion's loads are in; no one reads the ring any more */
  }

  if (S.splits > 1) { /* hand the tile to the last split to finish; partials column-major */
    float *partial = ptr_at<float>(S.partial, 0);
    const int64_t slot = (tile * S.splits + split) * GK_MATMUL_SKINNY_SLOT_FLOATS(64);
    each_pair([&](float *v, int r, int c) {
      *reinterpret_cast<float2 *>(partial + slot + c * BM + r) = make_float2(v[0], v[1]);
    });
    if (a_rms && threadIdx.x < BM) partial[slot + BM * BN + threadIdx.x] = fusion.squares[threadIdx.x];
    if (!last_to_arrive(S.counters, tile, S.splits, 1, 256)) return;
    each_pair([&](float *v, int, int) { v[0] = v[1] = 0.0f; });
    /* GROUP splits' loads in flight at once, then their sums in split order
     * (the same bits every run): one split after another, the reads took an
     * L2 round trip each at the kernel's end */
    constexpr int GROUP = BM == 32 ? 4 : 2;
    for (int first = 0; first < S.splits; first += GROUP) {
      float2 part[GROUP][BM / 4];
#pragma unroll
      for (int u = 0; u < GROUP; u++) {
        const int64_t from = (tile * S.splits + first + u) * GK_MATMUL_SKINNY_SLOT_FLOATS(64);
        float2 *mine = part[u];
        each_pair([&](float *v, int r, int c) {
          const float2 zero = make_float2(0.0f, 0.0f);
          mine[(v - acc) / 2] = first + u < S.splits ? __ldcg(reinterpret_cast<const float2 *>(partial + from + c * BM + r)) : zero;
        });
      }
#pragma unroll
      for (int u = 0; u < GROUP; u++)
        each_pair([&](float *v, int, int) {
          v[0] += part[u][(v - acc) / 2].x;
          v[1] += part[u][(v - acc) / 2].y;
        });
    }
    if (a_rms && threadIdx.x < BM) { /* thread r replaces only the row sum it reads itself */
      float row_sum = 0.0f;
      for (int64_t s = 0; s < S.splits; s++)
        row_sum += __ldcg(partial + (tile * S.splits + s) * GK_MATMUL_SKINNY_SLOT_FLOATS(64) + BM * BN + threadIdx.x);
      fusion.squares[threadIdx.x] = row_sum;
    }
  }
  if constexpr (FUSED) {
    if (p.glu) skinny_wgmma_glu_store<T, BM>(p, reinterpret_cast<float *>(ring), each_pair, fusion, tile);
    else skinny_wgmma_fused_store<T, BM>(p, reinterpret_cast<float *>(ring), each_pair, fusion, tile);
    return;
  }
  if constexpr (BM != 32) load_old();
  T *out = ptr_at<T>(p.out, 0);
  const T *bias = bias_of<T>(p);
  each_pair([&](float *v, int r, int c) {
    const int64_t n = tile * BN + c;
#pragma unroll
    for (int e = 0; e < 2; e++)
      if (r + e < p.m && n < p.n)
        store1(out + (r + e) * p.ldo + n, epilogue_of(p, p.beta != 0.0f ? old_value<T>(old[(v - acc) / 2], e) : 0.0f,
                                                      bias, n, v[e]));
  });
#endif
}

#define GK_SKINNY_WGMMA_KERNEL(kind, dname, bm, fused)                                                   \
  GK_ENTRY(__launch_bounds__(GK_MATMUL_SKINNY_WGMMA_THREADS, 2), gk_matmul_skinny_wgmma##kind##dname##_m##bm, \
           __grid_constant__ cuda_matmul_skinny_tma_params, matmul_skinny_wgmma_impl<dname, bm, fused>(p))
GK_SKINNY_WGMMA_KERNEL(_, f16, 32, false)
GK_SKINNY_WGMMA_KERNEL(_, bf16, 32, false)
GK_SKINNY_WGMMA_KERNEL(_, f16, 64, false)
GK_SKINNY_WGMMA_KERNEL(_, bf16, 64, false)
GK_SKINNY_WGMMA_KERNEL(_fused_, f16, 32, true)
GK_SKINNY_WGMMA_KERNEL(_fused_, bf16, 32, true)
