/*
 * reference.c - float64 reference implementations (see reference.h).
 */
#include "reference.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gllmk/gllmk.h"

double ref_silu(double x) { return x / (1.0 + exp(-x)); }

/* Written without 1 + erf / 1 + tanh, which cancel to 0 for negative x. */
double ref_gelu(double x, int kind) {
  if (kind == GLLMK_GELU_TANH) { /* 0.5 (1 + tanh(u)) = sigmoid(2u) */
    double u = sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x);
    return x / (1.0 + exp(-2.0 * u));
  }
  return 0.5 * x * erfc(-x / sqrt(2.0)); /* 1 + erf(z) = erfc(-z) */
}

void ref_rmsnorm(int64_t rows, int64_t cols, const double *x, const double *w, double eps,
                 double *out) {
  for (int64_t r = 0; r < rows; r++) {
    const double *xr = x + r * cols;
    double sum_sq = 0.0;
    for (int64_t c = 0; c < cols; c++) sum_sq += xr[c] * xr[c];
    double inv = 1.0 / sqrt(sum_sq / (double)cols + eps);
    for (int64_t c = 0; c < cols; c++) out[r * cols + c] = xr[c] * inv * w[c];
  }
}

void ref_layernorm(int64_t rows, int64_t cols, const double *x, const double *w,
                   const double *b, double eps, double *out) {
  for (int64_t r = 0; r < rows; r++) {
    const double *xr = x + r * cols;
    double mean = 0.0, var = 0.0;
    for (int64_t c = 0; c < cols; c++) mean += xr[c];
    mean /= (double)cols;
    for (int64_t c = 0; c < cols; c++) var += (xr[c] - mean) * (xr[c] - mean);
    var /= (double)cols;
    double inv = 1.0 / sqrt(var + eps);
    for (int64_t c = 0; c < cols; c++)
      out[r * cols + c] = (xr[c] - mean) * inv * w[c] + (b ? b[c] : 0.0);
  }
}

void ref_softmax(int64_t rows, int64_t cols, const double *x, double scale, double *out) {
  for (int64_t r = 0; r < rows; r++) {
    const double *xr = x + r * cols;
    double *o = out + r * cols;
    double max = -INFINITY, sum = 0.0;
    for (int64_t c = 0; c < cols; c++) max = fmax(max, scale * xr[c]);
    for (int64_t c = 0; c < cols; c++) sum += (o[c] = exp(scale * xr[c] - max));
    for (int64_t c = 0; c < cols; c++) o[c] /= sum;
  }
}

void ref_rope(int64_t tokens, int64_t heads, int64_t head_dim, const double *x,
              const int32_t *positions, double theta, int64_t rotary_dim, int style,
              double *out) {
  ref_rope_freq(tokens, heads, head_dim, x, positions, theta, NULL, rotary_dim, style, out);
}

void ref_rope_freq(int64_t tokens, int64_t heads, int64_t head_dim, const double *x,
                   const int32_t *positions, double theta, const double *inv_freq,
                   int64_t rotary_dim, int style, double *out) {
  int64_t half = rotary_dim / 2;
  for (int64_t t = 0; t < tokens; t++) {
    for (int64_t h = 0; h < heads; h++) {
      const double *xv = x + (t * heads + h) * head_dim;
      double *o = out + (t * heads + h) * head_dim;
      memcpy(o, xv, (size_t)head_dim * sizeof *o);
      for (int64_t j = 0; j < half; j++) {
        double angle = positions[t] * (inv_freq ? inv_freq[j]
                                                : pow(theta, -2.0 * (double)j / (double)rotary_dim));
        double c = cos(angle), s = sin(angle);
        int64_t i0 = style == GLLMK_ROPE_NEOX ? j : 2 * j;
        int64_t i1 = style == GLLMK_ROPE_NEOX ? j + half : 2 * j + 1;
        o[i0] = xv[i0] * c - xv[i1] * s;
        o[i1] = xv[i0] * s + xv[i1] * c;
      }
    }
  }
}

void ref_rope_columns(int64_t m, int64_t n, int64_t columns, int64_t head_dim, double *out,
                      const int32_t *positions, double theta, const double *inv_freq,
                      int64_t rotary_dim) {
  double *heads = calloc((size_t)(m * columns), sizeof *heads);
  double *turned = malloc((size_t)(m * columns) * sizeof *turned);
  if (heads == NULL || turned == NULL) abort();
  for (int64_t r = 0; r < m; r++) memcpy(heads + r * columns, out + r * n, (size_t)columns * sizeof *heads);
  ref_rope_freq(m, columns / head_dim, head_dim, heads, positions, theta, inv_freq, rotary_dim,
                GLLMK_ROPE_GPTJ, turned);
  for (int64_t r = 0; r < m; r++) memcpy(out + r * n, turned + r * columns, (size_t)columns * sizeof *out);
  free(heads);
  free(turned);
}

void ref_glu_halves(int64_t m, int64_t n, const double *product, double *out, double *cond) {
  const int64_t half = n / 2;
  double product_sq = 0.0;
  for (int64_t i = 0; i < m * n; i++) product_sq += product[i] * product[i];
  const double product_rms = m > 0 && n > 0 ? sqrt(product_sq / (double)(m * n)) : 0.0;
  for (int64_t r = 0; r < m; r++)
    for (int64_t j = 0; j < half; j++) {
      const double g = product[r * n + j], u = product[r * n + half + j];
      const double sigmoid = 1.0 / (1.0 + exp(-g)), silu_slope = sigmoid * (1.0 + g * (1.0 - sigmoid));
      out[r * half + j] = ref_silu(g) * u;
      cond[r * half + j] = fabs(silu_slope * u) * (fabs(g) + product_rms) +
                           fabs(ref_silu(g)) * (fabs(u) + product_rms);
    }
}

void ref_llama3_inv_freq(double theta, int64_t rotary_dim, double factor, double low_freq_factor,
                         double high_freq_factor, double original_max_position, double *out) {
  double low_freq_wavelen = original_max_position / low_freq_factor;
  double high_freq_wavelen = original_max_position / high_freq_factor;
  for (int64_t j = 0; j < rotary_dim / 2; j++) {
    double inv_freq = pow(theta, -2.0 * (double)j / (double)rotary_dim);
    double wavelen = 2.0 * M_PI / inv_freq;
    if (wavelen < high_freq_wavelen) {
      out[j] = inv_freq;
    } else if (wavelen > low_freq_wavelen) {
      out[j] = inv_freq / factor;
    } else {
      double smooth = (original_max_position / wavelen - low_freq_factor) /
                      (high_freq_factor - low_freq_factor);
      out[j] = (1.0 - smooth) * inv_freq / factor + smooth * inv_freq;
    }
  }
}

void ref_matmul(const ref_matmul_problem *p, const double *a, const double *b,
                const double *bias, double *out) {
  for (int64_t bt = 0; bt < p->batch; bt++) {
    const double *ab = a + bt * p->m * p->k;
    const double *bb = p->b_batched ? b + bt * p->n * p->k : b;
    double *ob = out + bt * p->m * p->n;
    for (int64_t i = 0; i < p->m; i++) {
      for (int64_t j = 0; j < p->n; j++) {
        double dot = 0.0;
        for (int64_t l = 0; l < p->k; l++) {
          double bv = p->b_layout == GLLMK_B_NK ? bb[j * p->k + l] : bb[l * p->n + j];
          dot += ab[i * p->k + l] * bv;
        }
        double v = p->alpha * dot;
        /* beta = 0 must not read out: NaN there must not propagate. */
        if (p->beta != 0.0) v += p->beta * ob[i * p->n + j];
        if (bias) v += bias[j];
        ob[i * p->n + j] = v;
      }
    }
  }
}

/* One query row against the keys it may see: out[d] and the log-sum-exp.
 * Returns its lse; *lse_cond gets the softmax-weighted scale*sum_d |q_d k_d|,
 * the size a rounded dot product's error is relative to, so that a score that
 * cancels to near zero is judged fairly; out_cond[d] (if not NULL) the same
 * for out[d]: sum_j w_j |v_jd|, since each weight w_j is rounded (to 16 bits
 * where the tensor cores multiply it) and a few weighted values of opposite
 * signs can cancel to far less than that. */
static double attend_row(const ref_attention_problem *p, const double *qrow, const double *k,
                         const double *v, int64_t kv_head, int64_t visible, double *out,
                         double *out_cond, double *scores, double *magnitudes, double *lse_cond) {
  int64_t stride = p->hkv * p->d;
  for (int64_t d = 0; d < p->d; d++) out[d] = 0.0;
  if (out_cond)
    for (int64_t d = 0; d < p->d; d++) out_cond[d] = 0.0;
  *lse_cond = 0.0;
  if (visible <= 0) return -INFINITY;
  double max = -INFINITY, sum = 0.0, cond = 0.0;
  for (int64_t j = 0; j < visible; j++) {
    const double *kr = k + j * stride + kv_head * p->d;
    double s = 0.0, m = 0.0;
    for (int64_t d = 0; d < p->d; d++) {
      s += qrow[d] * kr[d];
      m += fabs(qrow[d] * kr[d]);
    }
    scores[j] = s * p->scale;
    magnitudes[j] = m * fabs(p->scale);
    max = fmax(max, scores[j]);
  }
  for (int64_t j = 0; j < visible; j++) {
    double w = exp(scores[j] - max);
    const double *vr = v + j * stride + kv_head * p->d;
    for (int64_t d = 0; d < p->d; d++) out[d] += w * vr[d];
    if (out_cond)
      for (int64_t d = 0; d < p->d; d++) out_cond[d] += w * fabs(vr[d]);
    sum += w;
    cond += w * magnitudes[j];
  }
  for (int64_t d = 0; d < p->d; d++) out[d] /= sum;
  if (out_cond)
    for (int64_t d = 0; d < p->d; d++) out_cond[d] /= sum;
  *lse_cond = cond / sum;
  return max + log(sum);
}

void ref_attention(const ref_attention_problem *p, const double *q, const double *k,
                   const double *v, const int32_t *kv_lens, double *out, double *lse,
                   double *lse_cond, double *out_cond) {
  size_t keys = (size_t)(p->skv > 0 ? p->skv : 1);
  double *scores = malloc(2 * keys * sizeof *scores);
  if (scores == NULL) abort(); /* test code: no way to go on */
  int64_t group = p->hq / p->hkv;
  for (int64_t b = 0; b < p->batch; b++) {
    int64_t len = kv_lens ? kv_lens[b] : p->skv;
    const double *kb = k + b * p->skv * p->hkv * p->d;
    const double *vb = v + b * p->skv * p->hkv * p->d;
    for (int64_t i = 0; i < p->sq; i++) {
      /* Causal: the query block is aligned to the end of the keys. */
      int64_t visible = p->causal ? i + len - p->sq + 1 : len;
      if (visible > len) visible = len;
      for (int64_t h = 0; h < p->hq; h++) {
        int64_t row = (b * p->sq + i) * p->hq + h;
        double cond;
        double l = attend_row(p, q + row * p->d, kb, vb, h / group, visible, out + row * p->d,
                              out_cond ? out_cond + row * p->d : NULL, scores, scores + keys, &cond);
        int64_t lse_index = (b * p->hq + h) * p->sq + i;
        if (lse) lse[lse_index] = l;
        if (lse_cond) lse_cond[lse_index] = cond;
      }
    }
  }
  free(scores);
}

/* ------------------------------------------------------------- sampling */

typedef struct ranked {
  double p;
  int64_t index;
} ranked;

/* Most likely first; equal probabilities keep the lower index first. */
static int by_probability(const void *x, const void *y) {
  const ranked *a = x, *b = y;
  if (a->p != b->p) return a->p < b->p ? 1 : -1;
  return a->index < b->index ? -1 : 1;
}

static double closer(double margin, double candidate) {
  return candidate < margin ? candidate : margin;
}

double ref_sample_probs(int64_t vocab, const double *logits, const ref_sample_filter *f,
                        double *probs) {
  ranked *order = malloc((size_t)vocab * sizeof *order);
  if (order == NULL) abort();
  double margin = 1.0;
  if (f->temperature <= 0.0) { /* greedy */
    int64_t best = 0;
    for (int64_t i = 1; i < vocab; i++)
      if (logits[i] > logits[best]) best = i;
    for (int64_t i = 0; i < vocab; i++) probs[i] = i == best ? 1.0 : 0.0;
    free(order);
    return margin;
  }
  double *scaled = probs; /* reuse the output as scratch */
  double max = -INFINITY, sum = 0.0;
  for (int64_t i = 0; i < vocab; i++) max = fmax(max, scaled[i] = logits[i] / f->temperature);
  for (int64_t i = 0; i < vocab; i++) sum += (scaled[i] = exp(scaled[i] - max));
  for (int64_t i = 0; i < vocab; i++) order[i] = (ranked){scaled[i] / sum, i};
  qsort(order, (size_t)vocab, sizeof *order, by_probability);

  int64_t kept = vocab;
  if (f->top_k > 0 && f->top_k < vocab) {
    kept = f->top_k;
    margin = closer(margin, (order[kept - 1].p - order[kept].p) / order[kept - 1].p);
  }
  double kept_mass = 0.0;
  for (int64_t i = 0; i < kept; i++) kept_mass += order[i].p;
  if (f->top_p < 1.0) {
    double cumulative = 0.0;
    int64_t n = kept;
    for (int64_t i = 0; i < kept; i++) {
      cumulative += order[i].p / kept_mass;
      margin = closer(margin, fabs(cumulative - f->top_p));
      if (cumulative >= f->top_p && n == kept) n = i + 1;
    }
    kept = n;
  }
  if (f->min_p > 0.0) {
    int64_t n = 0;
    for (int64_t i = 0; i < kept; i++) {
      double ratio = order[i].p / order[0].p;
      margin = closer(margin, fabs(ratio - f->min_p));
      if (ratio >= f->min_p) n = i + 1;
    }
    kept = n;
  }
  double mass = 0.0;
  for (int64_t i = 0; i < kept; i++) mass += order[i].p;
  for (int64_t i = 0; i < vocab; i++) probs[i] = 0.0;
  for (int64_t i = 0; i < kept; i++) probs[order[i].index] = order[i].p / mass;
  free(order);
  return margin;
}
