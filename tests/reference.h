/*
 * reference.h - float64 reference implementations of every gllmk op.
 *
 * The conformance suite compares each backend against these. They work on
 * dense row-major double arrays holding the values the device saw (inputs
 * already rounded to their dtype), follow the semantics written in gllmk.h
 * literally, and favour clarity over speed.
 */
#ifndef GLLMK_TESTS_REFERENCE_H_
#define GLLMK_TESTS_REFERENCE_H_

#include <stdint.h>

double ref_silu(double x);
/* kind: GLLMK_GELU_ERF or GLLMK_GELU_TANH. */
double ref_gelu(double x, int kind);

/* out[r, :] = x[r, :] / sqrt(mean(x[r, :]^2) + eps) * w */
void ref_rmsnorm(int64_t rows, int64_t cols, const double *x, const double *w, double eps,
                 double *out);
/* out[r, :] = (x - mean) / sqrt(var + eps) * w (+ b); b may be NULL. */
void ref_layernorm(int64_t rows, int64_t cols, const double *x, const double *w,
                   const double *b, double eps, double *out);
/* out[r, :] = softmax(scale * x[r, :]) */
void ref_softmax(int64_t rows, int64_t cols, const double *x, double scale, double *out);

/* x and out [tokens, heads, head_dim]; style: GLLMK_ROPE_NEOX or GLLMK_ROPE_GPTJ. */
void ref_rope(int64_t tokens, int64_t heads, int64_t head_dim, const double *x,
              const int32_t *positions, double theta, int64_t rotary_dim, int style,
              double *out);
/* The same with pair j turning by position * inv_freq[j] ([rotary_dim / 2])
 * instead of theta's frequencies, unless inv_freq is NULL. */
void ref_rope_freq(int64_t tokens, int64_t heads, int64_t head_dim, const double *x,
                   const int32_t *positions, double theta, const double *inv_freq,
                   int64_t rotary_dim, int style, double *out);
/* matmul's rope on a product: the first `columns` columns of each of the m
 * rows of out ([m, n]) turned in place, heads of head_dim, GPT-J pairs. */
void ref_rope_columns(int64_t m, int64_t n, int64_t columns, int64_t head_dim, double *out,
                      const int32_t *positions, double theta, const double *inv_freq,
                      int64_t rotary_dim);
/* matmul's glu on a product ([m, n]): out[r, j] = silu(product[r, j]) *
 * product[r, j + n / 2], out [m, n / 2]; and in cond, per element, what
 * the product's own errors move it by, in units of the tolerance: each
 * product value p may be off by tol * (|p| + P), P the product's rms (what
 * a plain matmul is held to), so cond = |silu'(g) u| (|g| + P) +
 * |silu(g)| (|u| + P). The |p| part is a backend rounding the product to
 * out's dtype before it joins the halves (the cpu does; silu amplifies it
 * where g is negative); the P part is a dot whose terms cancel (a small u
 * of a K = 2048 f32 sum is off by ~1e-6 P, times a large silu(g)). */
void ref_glu_halves(int64_t m, int64_t n, const double *product, double *out, double *cond);
/* Llama 3.1's frequencies ("rope_type": "llama3") for [rotary_dim / 2] out:
 * theta's, divided by `factor` below the low-frequency wavelength
 * original_max_position / low_freq_factor, kept above the high-frequency
 * one, interpolated between, as Hugging Face's _compute_llama3_parameters. */
void ref_llama3_inv_freq(double theta, int64_t rotary_dim, double factor, double low_freq_factor,
                         double high_freq_factor, double original_max_position, double *out);

typedef struct ref_matmul_problem {
  int64_t batch, m, n, k;
  int b_layout;  /* GLLMK_B_NK or GLLMK_B_KN */
  int b_batched; /* b has one matrix per batch (else one shared matrix) */
  double alpha, beta;
} ref_matmul_problem;
/* a [batch, m, k]; b [(batch,) n, k] or [(batch,) k, n]; bias [n] or NULL.
 * out [batch, m, n] holds the old values on entry (read only if beta != 0). */
void ref_matmul(const ref_matmul_problem *p, const double *a, const double *b,
                const double *bias, double *out);

typedef struct ref_attention_problem {
  int64_t batch, sq, skv, hq, hkv, d;
  double scale;
  int causal;
} ref_attention_problem;
/* q, out [batch, sq, hq, d]; k, v [batch, skv, hkv, d]; kv_lens [batch] or
 * NULL; lse [batch, hq, sq] or NULL. A query row that sees no key gets
 * out = 0 and lse = -inf. lse_cond (like lse, or NULL) gets the conditioning
 * of each lse: the softmax-weighted scale * sum_d |q_d k_d| of its keys;
 * out_cond (like out, or NULL) that of each output: sum_j w_j |v_jd| over the
 * softmax weights w_j. */
void ref_attention(const ref_attention_problem *p, const double *q, const double *k,
                   const double *v, const int32_t *kv_lens, double *out, double *lse,
                   double *lse_cond, double *out_cond);

typedef struct ref_sample_filter {
  double temperature, top_p, min_p;
  int32_t top_k;
} ref_sample_filter;
/* The distribution gllmk_sample draws from for one row of `vocab` logits:
 * softmax(logits / temperature), then top-k, then top-p (smallest set of the
 * most likely tokens whose mass, renormalised after top-k, is >= top_p),
 * then min-p (drop p < min_p * p_max); what is left is renormalised into
 * probs. Returns how far the closest filter decision lies from its threshold
 * (relative), so a test can avoid inputs where float rounding could flip it. */
double ref_sample_probs(int64_t vocab, const double *logits, const ref_sample_filter *f,
                        double *probs);

#endif /* GLLMK_TESTS_REFERENCE_H_ */
