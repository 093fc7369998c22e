/* Declarations of the layer kernels: convolution columns, max pooling, batch norm, relu.
 *
 * Like the kvstore kernels (mgext.h), they work on validated, C-contiguous buffers of
 * float32 (MG_F32) or float64 (MG_F64); module.c checks shapes and sizes first.  Each
 * kernel runs over a half-open range of independent work items (rows, planes or channels)
 * that mg_parallel_items hands to threads; no two items write the same memory, so the
 * results never depend on the split.
 */
#ifndef MG_LAYERS_H
#define MG_LAYERS_H

#include "mgext.h"

/* workers.c: run fn over the items [0, items) split into at most nthreads contiguous
 * ranges, on a pool of persistent worker threads (the caller runs the first range). */
void mg_parallel_items(size_t items, int nthreads, mg_range_fn fn, void *ctx);

/* A 2-D sliding window over (N, C, H, W) images, and its oh x ow positions. */
typedef struct {
    size_t n, c, h, w;
    size_t kh, kw, sh, sw, ph, pw, dh, dw;
    size_t oh, ow;
} mg_window;

/* conv.c: columns (C*kh*kw, N*oh*ow): row (c, i, j), column (n, y, x) holds
 * image[n, c, y*sh - ph + i*dh, x*sw - pw + j*dw], 0 outside the image. */
typedef struct {
    int dtype;
    mg_window g;
    const void *src;
    void *dst;
} mg_cols_args;
void mg_im2col_task(void *args, size_t begin, size_t end); /* items: column rows */
void mg_col2im_task(void *args, size_t begin, size_t end); /* items: (c, n) planes */

/* conv.c: dst (B, A, R) = src (A, B, R) with axes 0 and 1 swapped, plus bias[a] if given. */
typedef struct {
    int dtype;
    size_t a, b, r;
    const void *src;
    const void *bias;
    void *dst;
} mg_swap_args;
void mg_swap01_task(void *args, size_t begin, size_t end); /* items: dst rows (b, a) */

/* winograd.c: F(MxM, 3x3) transforms (M = m, 2 or 4) between images (n, c, h, w) or
 * outputs (n, c, oh, ow) and (m+2)^2 planes (., c, t) of t = n*th*tw tiles; items: channels. */
typedef struct {
    int dtype;
    size_t m, n, c, h, w, ph, pw, oh, ow, th, tw, t;
    const void *src;
    const void *bias;
    void *dst;
} mg_wino_args;
void mg_wino_input_task(void *args, size_t begin, size_t end);
void mg_wino_output_task(void *args, size_t begin, size_t end);
void mg_wino_output_adjoint_task(void *args, size_t begin, size_t end);
void mg_wino_input_adjoint_task(void *args, size_t begin, size_t end);

/* maxpool.c: max pooling of (N, C, H, W) over a window with dilation 1 and no padding
 * values (positions outside the image are skipped); argmax holds y*W + x or -1. */
typedef struct {
    int dtype;
    mg_window g;
    const void *x;
    void *out;
    int32_t *argmax;
} mg_maxpool_args;
void mg_maxpool_task(void *args, size_t begin, size_t end); /* items: (n, c) planes */

typedef struct {
    int dtype;
    size_t planes, in_size, out_size;
    const void *dy;
    const int32_t *argmax;
    void *dx;
    int bad; /* set when an argmax entry is out of range (that entry is skipped) */
} mg_maxpool_back_args;
void mg_maxpool_back_task(void *args, size_t begin, size_t end); /* items: planes */

/* batchnorm.c: data (outer, C, inner); per channel c over the other two axes. */
typedef struct {
    int dtype;
    size_t outer, c, inner;
    const void *x, *dy, *mean, *a, *b, *k;
    void *out;
    double *s1, *s2; /* per-channel double results */
    /* the fused kernels: p is (4, C) in the data's dtype, rows mean, scale, shift, inv_std;
     * gamma NULL stands for ones; act an mg_act, lo and hi clip's bounds */
    const void *gamma;
    void *p;
    int act;
    double lo, hi, eps;
} mg_bn_args;
void mg_bn_stats_task(void *args, size_t begin, size_t end);    /* s1 mean, s2 var */
void mg_bn_forward_task(void *args, size_t begin, size_t end);  /* out = (x-mean)*a + b */
void mg_bn_sums_task(void *args, size_t begin, size_t end);     /* s1 sum dy, s2 sum dy*(x-mean) */
void mg_bn_backward_task(void *args, size_t begin, size_t end); /* out = (dy*a + (x-mean)*b) + k */
/* s1 mean, s2 var, p rows 0, 1, 3 from them (row 2 given), out = act(normalized x) */
void mg_bn_train_task(void *args, size_t begin, size_t end);
void mg_bn_apply_task(void *args, size_t begin, size_t end); /* out = act((x-mean)*scale + shift) */
/* s1 sum g, s2 sum g*(x-mean), g = dy * act'(y); out = dx with batch / with given statistics */
void mg_bn_grad_task(void *args, size_t begin, size_t end);
void mg_bn_grad_given_task(void *args, size_t begin, size_t end);

/* relu.c: out = max(x, 0) (NaN kept) / out = dy * (x > 0); with `clip`, out = NumPy's
 * clip(x, lo, hi) / out = dy * (lo <= x <= hi); items: blocks of MG_RELU_BLOCK. */
#define MG_RELU_BLOCK 4096
typedef struct {
    int dtype, clip;
    size_t n;
    double lo, hi; /* the clip bounds, rounded to the dtype by the kernels */
    const void *x, *dy;
    void *out;
} mg_relu_args;
void mg_relu_task(void *args, size_t begin, size_t end);
void mg_relu_back_task(void *args, size_t begin, size_t end);

/* sgd.c: one SGD step (optimizer/sgd.py's formula) on w and mom (NULL: no momentum), in
 * place; items: blocks of MG_SGD_BLOCK elements. */
#define MG_SGD_BLOCK 16384
typedef struct {
    int dtype;
    size_t n;
    double lr, wd, momentum, rescale, clip; /* clip <= 0: no clipping */
    void *w, *mom;
    const void *grad;
} mg_sgd_args;
void mg_sgd_task(void *args, size_t begin, size_t end);

/* depthwise.c: depthwise convolution of images (n, c, h, w) with f = c*m filters of one
 * input channel each, w (f, kh, kw), output (n, f, oh, ow).  Kind MG_DW_FORWARD writes y
 * (items: (n, f) planes), MG_DW_DATA writes x from dy in y (items: (n, c) planes),
 * MG_DW_WEIGHT writes w from x and dy (items: filters).  Kernel sides at most
 * MG_DW_MAX_SIDE; mg_depthwise_offsets fills the tap offsets from g. */
#define MG_DW_MAX_SIDE 32
#define MG_DW_MAX_TAPS (MG_DW_MAX_SIDE * MG_DW_MAX_SIDE)
enum { MG_DW_FORWARD = 0, MG_DW_DATA = 1, MG_DW_WEIGHT = 2 };
typedef struct {
    int dtype, kind;
    mg_window g;
    size_t f, m;
    size_t rows[MG_DW_MAX_SIDE], cols[MG_DW_MAX_SIDE];
    size_t back_rows[MG_DW_MAX_SIDE], back_cols[MG_DW_MAX_SIDE];
    void *x, *y, *w; /* the one the kind computes is written, the others read */
    const void *bias;
    int failed;      /* set when a thread could not get its scratch plane */
} mg_dw_args;
void mg_depthwise_offsets(mg_dw_args *a);
void mg_depthwise_task(void *args, size_t begin, size_t end);

/* depthwise_blocks.c: the same three kinds on eight planes at a time (one vector lane each),
 * for small planes; windows of at most MG_DW_BLOCK_MAX_TAPS taps.  Items: (n, block of
 * eight filters) for the forward, (n, block of eight channels) for the data gradient,
 * blocks of eight filters for the weight gradient; mg_depthwise_block_items counts them. */
#define MG_DW_BLOCK_MAX_TAPS 49
size_t mg_depthwise_block_items(const mg_dw_args *a);
void mg_depthwise_block_task(void *args, size_t begin, size_t end);

/* lstm.c: one LSTM cell update on rows n of i2h, h2h (N, 4H) and c (N, H); out (2, N, H)
 * holds h' and c', act (N, 4H) the activated gates i, f, g, o.  With dout (2, N, H) = (dh',
 * dc') given, the backward writes da (N, 4H), the gradient of the pre-activations, and
 * dc (N, H) from act, c and out.  Items: rows. */
typedef struct {
    int dtype;
    size_t n, hidden;
    const void *i2h, *h2h, *c, *dout;
    void *out, *act, *da, *dc; /* forward writes out and act; backward reads them */
} mg_lstm_args;
void mg_lstm_task(void *args, size_t begin, size_t end);
/* The same update on `rows` contiguous rows, on the calling thread: x, y, act (rows, 4H);
 * c, h, cn (rows, H) (forward); act, da (rows, 4H), c, cn, dh, dcn, dc (rows, H) (backward). */
void mg_lstm_forward_rows(int dtype, size_t rows, size_t hd, const void *x, const void *y,
                          const void *c, void *act, void *h, void *cn);
void mg_lstm_backward_rows(int dtype, size_t rows, size_t hd, const void *act, const void *c,
                           const void *cn, const void *dh, const void *dcn, void *da, void *dc);

/* lstm_sequence.c: one LSTM layer's recurrence over T steps for the batch rows [lo, hi),
 * on the calling thread, its per-step products through the loaded BLAS's cblas gemm
 * (`gemm`: cblas_sgemm for MG_F32, cblas_dgemm for MG_F64, with 64-bit integers where
 * `ilp64`).  Arrays (G = 4H): px (T, N, G) the input projections with both biases; wh
 * (G, H); h0, c0 (N, H); out (T + 1, N, H): h of every step, then the last c; act (T, N,
 * G) the activated gates; cseq (T, N, H) c after every step.  Steps are read from T - 1
 * down to 0 when `reverse`.  The backward reads dout (T + 1, N, H) and writes dpx (T, N,
 * G), the gradient of the gates' pre-activations, and rows [lo, hi) of dh0 and dc0. */
typedef struct {
    void *fn;
    int ilp64;
} mg_gemm;
typedef struct {
    int dtype, reverse;
    size_t steps, n, hidden, lo, hi;
    mg_gemm gemm;
    const void *wh, *h0, *c0, *px, *dout;
    void *out, *act, *cseq, *dpx, *dh0, *dc0;
} mg_lstm_seq_args;
/* 0, or -1 where the work buffers could not be allocated */
int mg_lstm_sequence_forward(const mg_lstm_seq_args *a);
int mg_lstm_sequence_backward(const mg_lstm_seq_args *a);

/* gru.c: one GRU update on rows n of i2h, h2h (N, 3H; h2h with its bias) and h (N, H);
 * out (N, H) holds h', act (N, 4H) the gates r, z, n and h2h's new-gate part.  With
 * dout (N, H) = dh' given, the backward writes di2h and dh2h (N, 3H), the gradients of
 * the projections, and dh (N, H), the gradient of h through the update gate, from act
 * and h.  Items: rows. */
typedef struct {
    int dtype;
    size_t n, hidden;
    const void *i2h, *h2h, *h, *dout;
    void *out, *act, *di2h, *dh2h, *dh; /* forward writes out and act; backward reads act */
} mg_gru_args;
void mg_gru_task(void *args, size_t begin, size_t end);

/* softmax.c: softmax along the last axis of (rows, width) data, row by row.  x is the data
 * (backward kinds: y, the forward's output); dy the output's gradient (CE backward: dloss,
 * one per row); label (rows) class indices in [0, width), checked by the caller; stats
 * (rows, 2) = (max, log sum exp(x - max)), written by the CE forward, read by its backward;
 * out the result (CE forward: the loss, one per row).  Items: rows. */
enum {
    MG_SM_FORWARD = 0,
    MG_SM_LOG_FORWARD = 1,
    MG_SM_BACKWARD = 2,
    MG_SM_LOG_BACKWARD = 3,
    MG_SM_CE_FORWARD = 4,
    MG_SM_CE_BACKWARD = 5
};
typedef struct {
    int dtype, kind;
    size_t rows, width;
    const void *x, *dy;
    const int32_t *label;
    void *stats, *out;
} mg_softmax_args;
void mg_softmax_task(void *args, size_t begin, size_t end);

#endif
