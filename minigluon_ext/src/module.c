/* minigluon_ext._kernels: the CPython face of the C kernels.
 *
 * Callers (minigluon_ext/native.py) validate arguments first and give clear messages; this
 * layer checks again what memory safety depends on (C-contiguous, aligned, writable where
 * written, matching dtypes and lengths), so a direct call with bad buffers raises instead
 * of crashing.  The GIL is released while a kernel runs.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "activation.h"
#include "layers.h"
#include "rows.h"

static const char *DTYPE_NAMES[] = {"float16", "float32", "float64"};

/* -1 for anything but a native float16/float32/float64 buffer */
static int float_dtype(const Py_buffer *v)
{
    const char *f = v->format ? v->format : "B";
    if (*f == '@' || *f == '=')
        f++;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    else if (*f == '<')
        f++;
#endif
    if (f[0] == 0 || f[1] != 0)
        return -1;
    if (f[0] == 'e' && v->itemsize == 2)
        return MG_F16;
    if (f[0] == 'f' && v->itemsize == 4)
        return MG_F32;
    if (f[0] == 'd' && v->itemsize == 8)
        return MG_F64;
    return -1;
}

static int is_word_buffer(const Py_buffer *v)
{
    const char *f = v->format ? v->format : "B";
    if (*f == '@' || *f == '=' || *f == '<')
        f++;
    return v->itemsize == 4 && f[0] != 0 && f[1] == 0 && strchr("IiLl", f[0]) != NULL;
}

/* Get a C-contiguous buffer; on failure raise ValueError naming the function and argument. */
static int get_buffer(PyObject *obj, Py_buffer *v, int writable, const char *fn,
                      const char *name)
{
    int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(obj, v, flags) < 0) {
        PyErr_Clear();
        PyErr_Format(PyExc_ValueError, "%s: %s must be a C-contiguous%s buffer (%.80s)", fn,
                     name, writable ? ", writable" : "", Py_TYPE(obj)->tp_name);
        return -1;
    }
    if (v->itemsize > 0 && ((uintptr_t)v->buf % (uintptr_t)v->itemsize) != 0) {
        PyErr_Format(PyExc_ValueError, "%s: %s is not aligned to its %zd-byte items", fn, name,
                     v->itemsize);
        PyBuffer_Release(v);
        return -1;
    }
    return 0;
}

static int get_float_buffer(PyObject *obj, Py_buffer *v, int writable, const char *fn,
                            const char *name, int *dtype)
{
    if (get_buffer(obj, v, writable, fn, name) < 0)
        return -1;
    *dtype = float_dtype(v);
    if (*dtype < 0) {
        PyErr_Format(PyExc_TypeError,
                     "%s: %s must hold float16, float32 or float64, got format '%s'", fn, name,
                     v->format ? v->format : "B");
        PyBuffer_Release(v);
        return -1;
    }
    return 0;
}

static Py_ssize_t count(const Py_buffer *v) { return v->itemsize ? v->len / v->itemsize : 0; }

static void run(size_t n, int nthreads, mg_range_fn fn, void *ctx)
{
    Py_BEGIN_ALLOW_THREADS
    mg_parallel_for(n, nthreads, fn, ctx);
    Py_END_ALLOW_THREADS
}

static PyObject *mismatch(const char *fn, const char *name, Py_ssize_t n, int dtype,
                          Py_ssize_t want_n, int want_dtype)
{
    return PyErr_Format(PyExc_ValueError, "%s: %s has %zd %s values, expected %zd %s", fn, name,
                        n, dtype >= 0 ? DTYPE_NAMES[dtype] : "?", want_n,
                        DTYPE_NAMES[want_dtype]);
}

static PyObject *py_sum_into(PyObject *self, PyObject *args)
{
    static const char *fn = "sum_into";
    PyObject *out_obj, *seq_obj;
    int accumulate, nthreads;
    if (!PyArg_ParseTuple(args, "OOpi", &out_obj, &seq_obj, &accumulate, &nthreads))
        return NULL;
    PyObject *seq = PySequence_Fast(seq_obj, "sum_into: arrays must be a sequence");
    if (!seq)
        return NULL;
    Py_ssize_t k = PySequence_Fast_GET_SIZE(seq);
    Py_buffer out;
    int dtype, ok = 0;
    Py_ssize_t held = 0;
    Py_buffer *views = NULL;
    const void **ptrs = NULL;
    if (k < 1 || k > INT_MAX) {
        PyErr_SetString(PyExc_ValueError, "sum_into: arrays must hold at least one array");
        Py_DECREF(seq);
        return NULL;
    }
    if (get_float_buffer(out_obj, &out, 1, fn, "out", &dtype) < 0) {
        Py_DECREF(seq);
        return NULL;
    }
    views = PyMem_Calloc((size_t)k, sizeof(Py_buffer));
    ptrs = PyMem_Calloc((size_t)k, sizeof(void *));
    if (!views || !ptrs) {
        PyErr_NoMemory();
        goto done;
    }
    for (; held < k; held++) {
        char name[32];
        int dt;
        snprintf(name, sizeof name, "arrays[%zd]", held);
        if (get_float_buffer(PySequence_Fast_GET_ITEM(seq, held), &views[held], 0, fn, name,
                             &dt) < 0)
            goto done;
        if (dt != dtype || count(&views[held]) != count(&out)) {
            mismatch(fn, name, count(&views[held]), dt, count(&out), dtype);
            held++;
            goto done;
        }
        ptrs[held] = views[held].buf;
    }
    int stream = dtype != MG_F16 && (size_t)out.len >= mg_cpu.stream_bytes;
    mg_sum_args a = {dtype, accumulate, (int)k, stream, out.buf, ptrs};
    run((size_t)count(&out), nthreads, mg_sum_range, &a);
    ok = 1;
done:
    for (Py_ssize_t j = 0; j < held; j++)
        PyBuffer_Release(&views[j]);
    PyMem_Free(views);
    PyMem_Free(ptrs);
    PyBuffer_Release(&out);
    Py_DECREF(seq);
    if (!ok)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *py_scale_add(PyObject *self, PyObject *args)
{
    static const char *fn = "scale_add";
    PyObject *out_obj, *a_obj;
    double alpha, beta;
    int nthreads, dt_out, dt_a;
    Py_buffer out, a;
    if (!PyArg_ParseTuple(args, "OOddi", &out_obj, &a_obj, &alpha, &beta, &nthreads))
        return NULL;
    if (get_float_buffer(out_obj, &out, 1, fn, "out", &dt_out) < 0)
        return NULL;
    if (get_float_buffer(a_obj, &a, 0, fn, "a", &dt_a) < 0) {
        PyBuffer_Release(&out);
        return NULL;
    }
    PyObject *result = NULL;
    if (dt_a != dt_out || count(&a) != count(&out)) {
        mismatch(fn, "a", count(&a), dt_a, count(&out), dt_out);
    } else {
        mg_scale_add_args s = {dt_out, alpha, beta, out.buf, a.buf};
        run((size_t)count(&out), nthreads, mg_scale_add_range, &s);
        result = Py_None;
        Py_INCREF(result);
    }
    PyBuffer_Release(&a);
    PyBuffer_Release(&out);
    return result;
}

static PyObject *py_quantize_2bit(PyObject *self, PyObject *args)
{
    static const char *fn = "quantize_2bit";
    PyObject *g_obj, *r_obj, *p_obj;
    double threshold;
    int nthreads, dt_g, dt_r;
    Py_buffer g, r, p;
    if (!PyArg_ParseTuple(args, "OOOdi", &g_obj, &r_obj, &p_obj, &threshold, &nthreads))
        return NULL;
    if (!(threshold > 0)) /* also refuses NaN */
        return PyErr_Format(PyExc_ValueError, "%s: threshold must be > 0, got %g", fn, threshold);
    if (get_float_buffer(g_obj, &g, 0, fn, "grad", &dt_g) < 0)
        return NULL;
    if (get_float_buffer(r_obj, &r, 1, fn, "residual", &dt_r) < 0) {
        PyBuffer_Release(&g);
        return NULL;
    }
    if (get_buffer(p_obj, &p, 1, fn, "out") < 0) {
        PyBuffer_Release(&r);
        PyBuffer_Release(&g);
        return NULL;
    }
    PyObject *result = NULL;
    Py_ssize_t n = count(&g);
    int want_r = dt_g == MG_F16 ? MG_F32 : dt_g;
    if (dt_r != want_r || count(&r) != n) {
        mismatch(fn, "residual", count(&r), dt_r, n, want_r);
    } else if (!is_word_buffer(&p) || count(&p) != (n + 15) / 16) {
        PyErr_Format(PyExc_ValueError, "%s: out must hold %zd 32-bit words for %zd values", fn,
                     (n + 15) / 16, n);
    } else {
        mg_quantize_args q = {dt_g, threshold, g.buf, r.buf, (uint8_t *)p.buf, (size_t)n};
        run((size_t)n, nthreads, mg_quantize_range, &q);
        result = Py_None;
        Py_INCREF(result);
    }
    PyBuffer_Release(&p);
    PyBuffer_Release(&r);
    PyBuffer_Release(&g);
    return result;
}

static PyObject *py_dequantize_2bit(PyObject *self, PyObject *args)
{
    static const char *fn = "dequantize_2bit";
    PyObject *p_obj, *out_obj, *lut_obj;
    int add, nthreads, dt_out, dt_lut;
    Py_buffer p, out, lut;
    if (!PyArg_ParseTuple(args, "OOOpi", &p_obj, &out_obj, &lut_obj, &add, &nthreads))
        return NULL;
    if (get_buffer(p_obj, &p, 0, fn, "packed") < 0)
        return NULL;
    if (get_float_buffer(out_obj, &out, 1, fn, "out", &dt_out) < 0) {
        PyBuffer_Release(&p);
        return NULL;
    }
    if (get_float_buffer(lut_obj, &lut, 0, fn, "lut", &dt_lut) < 0) {
        PyBuffer_Release(&out);
        PyBuffer_Release(&p);
        return NULL;
    }
    PyObject *result = NULL;
    Py_ssize_t n = count(&out);
    if (!is_word_buffer(&p) || count(&p) != (n + 15) / 16) {
        PyErr_Format(PyExc_ValueError, "%s: packed must hold %zd 32-bit words for %zd values",
                     fn, (n + 15) / 16, n);
    } else if (dt_lut != dt_out || count(&lut) != 4) {
        mismatch(fn, "lut", count(&lut), dt_lut, 4, dt_out);
    } else {
        mg_dequantize_args d = {dt_out, add, lut.buf, (const uint8_t *)p.buf, out.buf};
        run((size_t)n, nthreads, mg_dequantize_range, &d);
        result = Py_None;
        Py_INCREF(result);
    }
    PyBuffer_Release(&lut);
    PyBuffer_Release(&out);
    PyBuffer_Release(&p);
    return result;
}

static PyObject *convert(PyObject *args, const char *fn, int src_dt, int dst_dt, mg_range_fn task)
{
    PyObject *src_obj, *dst_obj;
    int nthreads, dt_s, dt_d;
    Py_buffer s, d;
    if (!PyArg_ParseTuple(args, "OOi", &src_obj, &dst_obj, &nthreads))
        return NULL;
    if (get_float_buffer(src_obj, &s, 0, fn, "src", &dt_s) < 0)
        return NULL;
    if (get_float_buffer(dst_obj, &d, 1, fn, "out", &dt_d) < 0) {
        PyBuffer_Release(&s);
        return NULL;
    }
    PyObject *result = NULL;
    if (dt_s != src_dt) {
        mismatch(fn, "src", count(&s), dt_s, count(&s), src_dt);
    } else if (dt_d != dst_dt || count(&d) != count(&s)) {
        mismatch(fn, "out", count(&d), dt_d, count(&s), dst_dt);
    } else {
        mg_convert_args c = {s.buf, d.buf};
        run((size_t)count(&s), nthreads, task, &c);
        result = Py_None;
        Py_INCREF(result);
    }
    PyBuffer_Release(&d);
    PyBuffer_Release(&s);
    return result;
}

static PyObject *py_f16_to_f32(PyObject *self, PyObject *args)
{
    return convert(args, "f16_to_f32", MG_F16, MG_F32, mg_h2f_task);
}

static PyObject *py_f32_to_f16(PyObject *self, PyObject *args)
{
    return convert(args, "f32_to_f16", MG_F32, MG_F16, mg_f2h_task);
}

/* ---- layer kernels ------------------------------------------------------------------ */

/* The buffers one call holds, released together. */
typedef struct {
    Py_buffer v[8];
    int held;
} mg_buffers;

static void release_all(mg_buffers *b)
{
    while (b->held > 0)
        PyBuffer_Release(&b->v[--b->held]);
}

static int is_int32_buffer(const Py_buffer *v)
{
    const char *f = v->format ? v->format : "B";
    if (*f == '@' || *f == '=' || *f == '<')
        f++;
    return v->itemsize == 4 && (strcmp(f, "i") == 0 || strcmp(f, "l") == 0);
}

/* A float32/float64 buffer with `ndim` axes (0: any); NULL with an exception on failure. */
static Py_buffer *take_float(mg_buffers *b, PyObject *obj, int writable, int ndim,
                             const char *fn, const char *name, int *dtype)
{
    Py_buffer *v = &b->v[b->held];
    if (get_float_buffer(obj, v, writable, fn, name, dtype) < 0)
        return NULL;
    b->held++;
    if (*dtype == MG_F16) {
        PyErr_Format(PyExc_TypeError, "%s: %s must hold float32 or float64, got float16", fn,
                     name);
        return NULL;
    }
    if (ndim && v->ndim != ndim) {
        PyErr_Format(PyExc_ValueError, "%s: %s must have %d axes, got %d", fn, name, ndim,
                     v->ndim);
        return NULL;
    }
    return v;
}

/* A buffer of `count` items of `want` (MG_F32/MG_F64, or -1 for int32). */
static Py_buffer *take_like(mg_buffers *b, PyObject *obj, int writable, const char *fn,
                            const char *name, int want, size_t n)
{
    Py_buffer *v = &b->v[b->held];
    if (get_buffer(obj, v, writable, fn, name) < 0)
        return NULL;
    b->held++;
    int ok = want < 0 ? is_int32_buffer(v) : float_dtype(v) == want;
    if (!ok || (size_t)count(v) != n) {
        PyErr_Format(PyExc_ValueError, "%s: %s must hold %zu %s values, got %zd of format '%s'",
                     fn, name, n, want < 0 ? "int32" : DTYPE_NAMES[want], count(v),
                     v->format ? v->format : "B");
        return NULL;
    }
    return v;
}

static PyObject *run_layer(mg_buffers *b, size_t items, int nthreads, mg_range_fn fn,
                           void *ctx)
{
    Py_BEGIN_ALLOW_THREADS
    mg_parallel_items(items, nthreads, fn, ctx);
    Py_END_ALLOW_THREADS
    release_all(b);
    Py_RETURN_NONE;
}

static PyObject *fail(mg_buffers *b)
{
    release_all(b);
    return NULL;
}

#define MG_MAX_WINDOW ((Py_ssize_t)1 << 24)

/* *out = the product of sizes; -1 with an exception when it does not fit. */
static int product(const char *fn, const size_t *dims, int n, size_t *out)
{
    size_t p = 1;
    for (int i = 0; i < n; i++)
        if (__builtin_mul_overflow(p, dims[i], &p) || p > (size_t)PY_SSIZE_T_MAX / 16) {
            PyErr_Format(PyExc_ValueError, "%s: the arrays would be too large", fn);
            return -1;
        }
    *out = p;
    return 0;
}

/* Parse (kh, kw, sh, sw, ph, pw, dh, dw) into g: sizes in [1, 2^24], pads in [0, 2^24). */
static int window_params(const char *fn, const Py_ssize_t *v, mg_window *g)
{
    for (int i = 0; i < 8; i++) {
        int pad = i == 4 || i == 5;
        if (v[i] < (pad ? 0 : 1) || v[i] > MG_MAX_WINDOW) {
            PyErr_Format(PyExc_ValueError, "%s: kernel, stride and dilate must be in [1, %zd] "
                         "and pad in [0, %zd], got %zd", fn, MG_MAX_WINDOW, MG_MAX_WINDOW, v[i]);
            return -1;
        }
    }
    g->kh = (size_t)v[0], g->kw = (size_t)v[1], g->sh = (size_t)v[2], g->sw = (size_t)v[3];
    g->ph = (size_t)v[4], g->pw = (size_t)v[5], g->dh = (size_t)v[6], g->dw = (size_t)v[7];
    return 0;
}

/* The image geometry of a 4-D buffer and the convolution output size. */
static int conv_window(const char *fn, const Py_buffer *img, const Py_ssize_t *v, mg_window *g)
{
    if (window_params(fn, v, g) < 0)
        return -1;
    g->n = (size_t)img->shape[0], g->c = (size_t)img->shape[1];
    g->h = (size_t)img->shape[2], g->w = (size_t)img->shape[3];
    size_t span_h = g->dh * (g->kh - 1) + 1, span_w = g->dw * (g->kw - 1) + 1;
    if (g->h + 2 * g->ph < span_h || g->w + 2 * g->pw < span_w) {
        PyErr_Format(PyExc_ValueError, "%s: the kernel does not fit the padded image", fn);
        return -1;
    }
    g->oh = (g->h + 2 * g->ph - span_h) / g->sh + 1;
    g->ow = (g->w + 2 * g->pw - span_w) / g->sw + 1;
    return 0;
}

static int cols_count(const char *fn, const mg_window *g, size_t *n)
{
    size_t dims[6] = {g->c, g->kh, g->kw, g->n, g->oh, g->ow};
    return product(fn, dims, 6, n);
}

static PyObject *py_im2col(PyObject *self, PyObject *args)
{
    static const char *fn = "im2col";
    PyObject *x_obj, *cols_obj;
    Py_ssize_t v[8];
    int nthreads, dtype;
    mg_buffers b = {.held = 0};
    mg_cols_args a;
    if (!PyArg_ParseTuple(args, "OOnnnnnnnni", &x_obj, &cols_obj, &v[0], &v[1], &v[2], &v[3],
                          &v[4], &v[5], &v[6], &v[7], &nthreads))
        return NULL;
    Py_buffer *x = take_float(&b, x_obj, 0, 4, fn, "x", &dtype);
    size_t n;
    if (!x || conv_window(fn, x, v, &a.g) < 0 || cols_count(fn, &a.g, &n) < 0)
        return fail(&b);
    Py_buffer *cols = take_like(&b, cols_obj, 1, fn, "out", dtype, n);
    if (!cols)
        return fail(&b);
    a.dtype = dtype, a.src = x->buf, a.dst = cols->buf;
    return run_layer(&b, a.g.c * a.g.kh * a.g.kw, nthreads, mg_im2col_task, &a);
}

static PyObject *py_col2im(PyObject *self, PyObject *args)
{
    static const char *fn = "col2im";
    PyObject *cols_obj, *x_obj;
    Py_ssize_t v[8];
    int nthreads, dtype;
    mg_buffers b = {.held = 0};
    mg_cols_args a;
    if (!PyArg_ParseTuple(args, "OOnnnnnnnni", &cols_obj, &x_obj, &v[0], &v[1], &v[2], &v[3],
                          &v[4], &v[5], &v[6], &v[7], &nthreads))
        return NULL;
    Py_buffer *x = take_float(&b, x_obj, 1, 4, fn, "out", &dtype);
    size_t n;
    if (!x || conv_window(fn, x, v, &a.g) < 0 || cols_count(fn, &a.g, &n) < 0)
        return fail(&b);
    Py_buffer *cols = take_like(&b, cols_obj, 0, fn, "cols", dtype, n);
    if (!cols)
        return fail(&b);
    a.dtype = dtype, a.src = cols->buf, a.dst = x->buf;
    return run_layer(&b, a.g.c * a.g.n, nthreads, mg_col2im_task, &a);
}

static PyObject *py_swap01(PyObject *self, PyObject *args)
{
    static const char *fn = "swap01";
    PyObject *src_obj, *bias_obj, *out_obj;
    int nthreads, dtype;
    mg_buffers b = {.held = 0};
    mg_swap_args a;
    if (!PyArg_ParseTuple(args, "OOOi", &src_obj, &bias_obj, &out_obj, &nthreads))
        return NULL;
    Py_buffer *src = take_float(&b, src_obj, 0, 3, fn, "src", &dtype);
    if (!src)
        return fail(&b);
    a.a = (size_t)src->shape[0], a.b = (size_t)src->shape[1], a.r = (size_t)src->shape[2];
    Py_buffer *out = take_like(&b, out_obj, 1, fn, "out", dtype, (size_t)count(src));
    if (!out)
        return fail(&b);
    a.bias = NULL;
    if (bias_obj != Py_None) {
        Py_buffer *bias = take_like(&b, bias_obj, 0, fn, "bias", dtype, a.a);
        if (!bias)
            return fail(&b);
        a.bias = bias->buf;
    }
    a.dtype = dtype, a.src = src->buf, a.dst = out->buf;
    return run_layer(&b, a.a * a.b, nthreads, mg_swap01_task, &a);
}

static PyObject *py_max_pool2d(PyObject *self, PyObject *args)
{
    static const char *fn = "max_pool2d";
    PyObject *x_obj, *out_obj, *am_obj;
    Py_ssize_t v[8] = {0, 0, 0, 0, 0, 0, 1, 1};
    int nthreads, dtype, dt_out;
    mg_buffers b = {.held = 0};
    mg_maxpool_args a;
    if (!PyArg_ParseTuple(args, "OOOnnnnnni", &x_obj, &out_obj, &am_obj, &v[0], &v[1], &v[2],
                          &v[3], &v[4], &v[5], &nthreads))
        return NULL;
    Py_buffer *x = take_float(&b, x_obj, 0, 4, fn, "x", &dtype);
    Py_buffer *out = x ? take_float(&b, out_obj, 1, 4, fn, "out", &dt_out) : NULL;
    if (!out || window_params(fn, v, &a.g) < 0)
        return fail(&b);
    if (dt_out != dtype || out->shape[0] != x->shape[0] || out->shape[1] != x->shape[1]) {
        PyErr_Format(PyExc_ValueError, "%s: out must match x in dtype, batch and channels", fn);
        return fail(&b);
    }
    a.g.n = (size_t)x->shape[0], a.g.c = (size_t)x->shape[1];
    a.g.h = (size_t)x->shape[2], a.g.w = (size_t)x->shape[3];
    a.g.oh = (size_t)out->shape[2], a.g.ow = (size_t)out->shape[3];
    if (a.g.h * a.g.w > INT32_MAX) {
        PyErr_Format(PyExc_ValueError, "%s: feature maps of over 2^31 elements", fn);
        return fail(&b);
    }
    Py_buffer *am = take_like(&b, am_obj, 1, fn, "argmax", -1, (size_t)count(out));
    if (!am)
        return fail(&b);
    a.dtype = dtype, a.x = x->buf, a.out = out->buf, a.argmax = (int32_t *)am->buf;
    return run_layer(&b, a.g.n * a.g.c, nthreads, mg_maxpool_task, &a);
}

static PyObject *py_max_pool2d_backward(PyObject *self, PyObject *args)
{
    static const char *fn = "max_pool2d_backward";
    PyObject *dy_obj, *am_obj, *dx_obj;
    int nthreads, dtype, dt_dx;
    mg_buffers b = {.held = 0};
    mg_maxpool_back_args a;
    if (!PyArg_ParseTuple(args, "OOOi", &dy_obj, &am_obj, &dx_obj, &nthreads))
        return NULL;
    Py_buffer *dy = take_float(&b, dy_obj, 0, 4, fn, "dy", &dtype);
    Py_buffer *dx = dy ? take_float(&b, dx_obj, 1, 4, fn, "out", &dt_dx) : NULL;
    if (!dx)
        return fail(&b);
    if (dt_dx != dtype || dx->shape[0] != dy->shape[0] || dx->shape[1] != dy->shape[1]) {
        PyErr_Format(PyExc_ValueError, "%s: out must match dy in dtype, batch and channels", fn);
        return fail(&b);
    }
    Py_buffer *am = take_like(&b, am_obj, 0, fn, "argmax", -1, (size_t)count(dy));
    if (!am)
        return fail(&b);
    a.dtype = dtype, a.planes = (size_t)(dy->shape[0] * dy->shape[1]);
    a.in_size = (size_t)(dx->shape[2] * dx->shape[3]);
    a.out_size = (size_t)(dy->shape[2] * dy->shape[3]);
    a.dy = dy->buf, a.argmax = (const int32_t *)am->buf, a.dx = dx->buf, a.bad = 0;
    Py_BEGIN_ALLOW_THREADS
    mg_parallel_items(a.planes, nthreads, mg_maxpool_back_task, &a);
    Py_END_ALLOW_THREADS
    release_all(&b);
    if (a.bad)
        return PyErr_Format(PyExc_ValueError, "%s: argmax holds positions outside the input "
                            "planes of %zu elements (skipped)", fn, a.in_size);
    Py_RETURN_NONE;
}

/* winograd(kind, src, dst, bias, ph, pw, m, nthreads); kind 0 input, 1 output, 2 output
 * adjoint, 3 input adjoint; m the output tile size, 2 or 4.  The 4-D side (image or
 * output) gives the geometry. */
static PyObject *py_winograd(PyObject *self, PyObject *args)
{
    static const char *fn = "winograd";
    static const mg_range_fn tasks[4] = {mg_wino_input_task, mg_wino_output_task,
                                         mg_wino_output_adjoint_task, mg_wino_input_adjoint_task};
    PyObject *src_obj, *dst_obj, *bias_obj;
    Py_ssize_t ph, pw;
    int kind, m, nthreads, dtype;
    mg_buffers b = {.held = 0};
    mg_wino_args a;
    if (!PyArg_ParseTuple(args, "iOOOnnii", &kind, &src_obj, &dst_obj, &bias_obj, &ph, &pw,
                          &m, &nthreads))
        return NULL;
    if (kind < 0 || kind > 3)
        return PyErr_Format(PyExc_ValueError, "%s: kind must be 0..3, got %d", fn, kind);
    if (m != 2 && m != 4)
        return PyErr_Format(PyExc_ValueError, "%s: tile must be 2 or 4, got %d", fn, m);
    if (ph < 0 || pw < 0 || ph > MG_MAX_WINDOW || pw > MG_MAX_WINDOW)
        return PyErr_Format(PyExc_ValueError, "%s: pad must be in [0, %zd]", fn, MG_MAX_WINDOW);
    int image_is_src = kind == 0 || kind == 2, is_image = kind == 0 || kind == 3;
    Py_buffer *img = take_float(&b, image_is_src ? src_obj : dst_obj, !image_is_src, 4, fn,
                                image_is_src ? "src" : "out", &dtype);
    if (!img)
        return fail(&b);
    a.dtype = dtype, a.n = (size_t)img->shape[0], a.c = (size_t)img->shape[1];
    a.ph = (size_t)ph, a.pw = (size_t)pw;
    if (is_image) {
        a.h = (size_t)img->shape[2], a.w = (size_t)img->shape[3];
        if (a.h + 2 * a.ph < 3 || a.w + 2 * a.pw < 3) {
            PyErr_Format(PyExc_ValueError, "%s: a 3x3 kernel does not fit the padded image", fn);
            return fail(&b);
        }
        a.oh = a.h + 2 * a.ph - 2, a.ow = a.w + 2 * a.pw - 2;
    } else {
        a.oh = (size_t)img->shape[2], a.ow = (size_t)img->shape[3], a.h = a.w = 0;
    }
    a.m = (size_t)m, a.th = (a.oh + a.m - 1) / a.m, a.tw = (a.ow + a.m - 1) / a.m;
    size_t dims[5] = {(a.m + 2) * (a.m + 2), a.c, a.n, a.th, a.tw}, planes;
    if (product(fn, dims, 5, &planes) < 0)
        return fail(&b);
    a.t = a.n * a.th * a.tw;
    Py_buffer *other = take_like(&b, image_is_src ? dst_obj : src_obj, image_is_src, fn,
                                 image_is_src ? "out" : "src", dtype, planes);
    if (!other)
        return fail(&b);
    a.bias = NULL;
    if (bias_obj != Py_None) {
        Py_buffer *bias = kind == 1 ? take_like(&b, bias_obj, 0, fn, "bias", dtype, a.c) : NULL;
        if (!bias) {
            if (kind != 1)
                PyErr_Format(PyExc_ValueError, "%s: only the output transform takes a bias", fn);
            return fail(&b);
        }
        a.bias = bias->buf;
    }
    a.src = image_is_src ? img->buf : other->buf;
    a.dst = image_is_src ? other->buf : img->buf;
    return run_layer(&b, a.c, nthreads, tasks[kind], &a);
}

/* depthwise(kind, x, y, w, bias, kh, kw, sh, sw, ph, pw, dh, dw, nthreads, blocked): x the
 * image (n, c, h, w), y the output or dy (n, f, oh, ow) with f = c*m, w the f*kh*kw filter
 * values, bias (f,) or None (forward only).  Kind 0 writes y, 1 writes x, 2 writes w;
 * `blocked` (optional, false) runs eight planes at a time (depthwise_blocks.c), not one. */
static PyObject *py_depthwise(PyObject *self, PyObject *args)
{
    static const char *fn = "depthwise";
    PyObject *x_obj, *y_obj, *w_obj, *bias_obj;
    Py_ssize_t v[8];
    int kind, nthreads, dtype, dt_y, blocked = 0;
    mg_buffers b = {.held = 0};
    mg_dw_args a;
    if (!PyArg_ParseTuple(args, "iOOOOnnnnnnnni|p", &kind, &x_obj, &y_obj, &w_obj, &bias_obj,
                          &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7], &nthreads,
                          &blocked))
        return NULL;
    if (kind < 0 || kind > 2)
        return PyErr_Format(PyExc_ValueError, "%s: kind must be 0..2, got %d", fn, kind);
    if (v[0] > MG_DW_MAX_SIDE || v[1] > MG_DW_MAX_SIDE)
        return PyErr_Format(PyExc_ValueError, "%s: kernel sides must be at most %d", fn,
                            MG_DW_MAX_SIDE);
    if (blocked && v[0] * v[1] > MG_DW_BLOCK_MAX_TAPS)
        return PyErr_Format(PyExc_ValueError, "%s: the blocked kernels take at most %d taps, "
                            "got a %zd x %zd kernel", fn, MG_DW_BLOCK_MAX_TAPS, v[0], v[1]);
    Py_buffer *x = take_float(&b, x_obj, kind == MG_DW_DATA, 4, fn, "x", &dtype);
    Py_buffer *y = x ? take_float(&b, y_obj, kind == MG_DW_FORWARD, 4, fn, "y", &dt_y) : NULL;
    if (!y || conv_window(fn, x, v, &a.g) < 0)
        return fail(&b);
    if (dt_y != dtype || y->shape[0] != x->shape[0] || x->shape[1] < 1 ||
        y->shape[1] % x->shape[1] != 0 || y->shape[1] < x->shape[1] ||
        (size_t)y->shape[2] != a.g.oh || (size_t)y->shape[3] != a.g.ow) {
        PyErr_Format(PyExc_ValueError, "%s: y must be (n, c*m, oh, ow) of x's dtype for the "
                     "image x and the window", fn);
        return fail(&b);
    }
    a.f = (size_t)y->shape[1], a.m = a.f / a.g.c;
    size_t taps = a.g.kh * a.g.kw;
    Py_buffer *w = take_like(&b, w_obj, kind == MG_DW_WEIGHT, fn, "w", dtype, a.f * taps);
    if (!w)
        return fail(&b);
    a.bias = NULL;
    if (bias_obj != Py_None) {
        Py_buffer *bias = kind == MG_DW_FORWARD ?
            take_like(&b, bias_obj, 0, fn, "bias", dtype, a.f) : NULL;
        if (!bias) {
            if (kind != MG_DW_FORWARD)
                PyErr_Format(PyExc_ValueError, "%s: only the forward kind takes a bias", fn);
            return fail(&b);
        }
        a.bias = bias->buf;
    }
    a.dtype = dtype, a.kind = kind, a.x = x->buf, a.y = y->buf, a.w = w->buf, a.failed = 0;
    mg_depthwise_offsets(&a);
    size_t items = kind == MG_DW_FORWARD ? a.g.n * a.f : kind == MG_DW_DATA ? a.g.n * a.g.c : a.f;
    if (blocked)
        items = mg_depthwise_block_items(&a);
    Py_BEGIN_ALLOW_THREADS
    mg_parallel_items(items, nthreads, blocked ? mg_depthwise_block_task : mg_depthwise_task, &a);
    Py_END_ALLOW_THREADS
    release_all(&b);
    if (a.failed)
        return PyErr_NoMemory();
    Py_RETURN_NONE;
}

/* lstm_cell(kind, c, act, out, a, b, dc, nthreads): c (N, H) sets the sizes.  Kind 0
 * (forward) reads a = i2h and b = h2h (N, 4H), writes act (N, 4H) and out (2, N, H);
 * kind 1 (backward) reads act, out and a = dout (2, N, H), writes b = da (N, 4H) and
 * dc (N, H); dc is None in the forward. */
static PyObject *py_lstm_cell(PyObject *self, PyObject *args)
{
    static const char *fn = "lstm_cell";
    PyObject *c_obj, *act_obj, *out_obj, *a_obj, *b_obj, *dc_obj;
    int kind, nthreads, dtype;
    mg_buffers b = {.held = 0};
    mg_lstm_args s;
    if (!PyArg_ParseTuple(args, "iOOOOOOi", &kind, &c_obj, &act_obj, &out_obj, &a_obj, &b_obj,
                          &dc_obj, &nthreads))
        return NULL;
    if (kind != 0 && kind != 1)
        return PyErr_Format(PyExc_ValueError, "%s: kind must be 0 or 1, got %d", fn, kind);
    int back = kind == 1;
    Py_buffer *c = take_float(&b, c_obj, 0, 2, fn, "c", &dtype);
    if (!c)
        return fail(&b);
    s.dtype = dtype, s.n = (size_t)c->shape[0], s.hidden = (size_t)c->shape[1];
    size_t state = s.n * s.hidden, gates = 4 * state;
    Py_buffer *act = take_like(&b, act_obj, !back, fn, "act", dtype, gates);
    Py_buffer *out = act ? take_like(&b, out_obj, !back, fn, "out", dtype, 2 * state) : NULL;
    Py_buffer *x = out ? take_like(&b, a_obj, 0, fn, back ? "dout" : "i2h", dtype,
                                   back ? 2 * state : gates) : NULL;
    Py_buffer *y = x ? take_like(&b, b_obj, back, fn, back ? "da" : "h2h", dtype, gates) : NULL;
    Py_buffer *dc = y && back ? take_like(&b, dc_obj, 1, fn, "dc", dtype, state) : NULL;
    if (!y || (back && !dc))
        return fail(&b);
    s.c = c->buf, s.act = act->buf, s.out = out->buf;
    s.i2h = back ? NULL : x->buf, s.h2h = back ? NULL : y->buf;
    s.dout = back ? x->buf : NULL, s.da = back ? y->buf : NULL, s.dc = back ? dc->buf : NULL;
    return run_layer(&b, s.n, nthreads, mg_lstm_task, &s);
}

/* The sequence arguments common to both directions: the gemm, the rows, the sizes from
 * `shape3` (px or act, (T, N, 4H)), and wh (4H, H), h0 or c0 counts checked by the callers. */
static int lstm_seq_sizes(const char *fn, mg_lstm_seq_args *s, unsigned long long gemm,
                          int ilp64, int reverse, Py_ssize_t lo, Py_ssize_t hi,
                          const Py_buffer *shape3)
{
    if (!gemm) {
        PyErr_Format(PyExc_ValueError, "%s: gemm must be the address of the BLAS's cblas "
                     "gemm, got 0", fn);
        return -1;
    }
    s->gemm.fn = (void *)(uintptr_t)gemm, s->gemm.ilp64 = ilp64 != 0, s->reverse = reverse;
    s->steps = (size_t)shape3->shape[0], s->n = (size_t)shape3->shape[1];
    size_t gates = (size_t)shape3->shape[2];
    if (s->steps < 1 || gates < 4 || gates % 4) {
        PyErr_Format(PyExc_ValueError, "%s: the gates must be (T, N, 4H) with T, H >= 1, "
                     "got (%zu, %zu, %zu)", fn, s->steps, s->n, gates);
        return -1;
    }
    s->hidden = gates / 4;
    if (lo < 0 || hi <= lo || (size_t)hi > s->n) {
        PyErr_Format(PyExc_ValueError, "%s: rows [%zd, %zd) must be a non-empty range within "
                     "the batch of %zu", fn, lo, hi, s->n);
        return -1;
    }
    if (!ilp64 && (s->n * gates > (size_t)INT32_MAX)) {
        PyErr_Format(PyExc_ValueError, "%s: sizes too large for a 32-bit BLAS", fn);
        return -1;
    }
    s->lo = (size_t)lo, s->hi = (size_t)hi;
    return 0;
}

static PyObject *lstm_seq_run(mg_buffers *b, int (*fn)(const mg_lstm_seq_args *),
                              const mg_lstm_seq_args *s)
{
    int err;
    Py_BEGIN_ALLOW_THREADS
    err = fn(s);
    Py_END_ALLOW_THREADS
    release_all(b);
    if (err)
        return PyErr_NoMemory();
    Py_RETURN_NONE;
}

/* lstm_sequence_forward(gemm, ilp64, reverse, lo, hi, px, wh, h0, c0, out, act, cseq):
 * rows [lo, hi) of one LSTM layer through every step (lstm_sequence.c). */
static PyObject *py_lstm_sequence_forward(PyObject *self, PyObject *args)
{
    static const char *fn = "lstm_sequence_forward";
    unsigned long long gemm;
    int ilp64, reverse, dtype;
    Py_ssize_t lo, hi;
    PyObject *px_obj, *wh_obj, *h0_obj, *c0_obj, *out_obj, *act_obj, *cseq_obj;
    mg_buffers b = {.held = 0};
    mg_lstm_seq_args s = {0};
    if (!PyArg_ParseTuple(args, "KpinnOOOOOOO", &gemm, &ilp64, &reverse, &lo, &hi, &px_obj,
                          &wh_obj, &h0_obj, &c0_obj, &out_obj, &act_obj, &cseq_obj))
        return NULL;
    Py_buffer *px = take_float(&b, px_obj, 0, 3, fn, "px", &dtype);
    if (!px || lstm_seq_sizes(fn, &s, gemm, ilp64, reverse, lo, hi, px) < 0)
        return fail(&b);
    s.dtype = dtype;
    size_t state = s.n * s.hidden, t = s.steps;
    Py_buffer *wh = take_like(&b, wh_obj, 0, fn, "wh", dtype, 4 * s.hidden * s.hidden);
    Py_buffer *h0 = wh ? take_like(&b, h0_obj, 0, fn, "h0", dtype, state) : NULL;
    Py_buffer *c0 = h0 ? take_like(&b, c0_obj, 0, fn, "c0", dtype, state) : NULL;
    Py_buffer *out = c0 ? take_like(&b, out_obj, 1, fn, "out", dtype, (t + 1) * state) : NULL;
    Py_buffer *act = out ? take_like(&b, act_obj, 1, fn, "act", dtype, 4 * t * state) : NULL;
    Py_buffer *cseq = act ? take_like(&b, cseq_obj, 1, fn, "cseq", dtype, t * state) : NULL;
    if (!cseq)
        return fail(&b);
    s.px = px->buf, s.wh = wh->buf, s.h0 = h0->buf, s.c0 = c0->buf;
    s.out = out->buf, s.act = act->buf, s.cseq = cseq->buf;
    return lstm_seq_run(&b, mg_lstm_sequence_forward, &s);
}

/* lstm_sequence_backward(gemm, ilp64, reverse, lo, hi, act, wh, c0, cseq, dout, dpx, dh0,
 * dc0): rows [lo, hi) of the same layer back through every step. */
static PyObject *py_lstm_sequence_backward(PyObject *self, PyObject *args)
{
    static const char *fn = "lstm_sequence_backward";
    unsigned long long gemm;
    int ilp64, reverse, dtype;
    Py_ssize_t lo, hi;
    PyObject *act_obj, *wh_obj, *c0_obj, *cseq_obj, *dout_obj, *dpx_obj, *dh0_obj, *dc0_obj;
    mg_buffers b = {.held = 0};
    mg_lstm_seq_args s = {0};
    if (!PyArg_ParseTuple(args, "KpinnOOOOOOOO", &gemm, &ilp64, &reverse, &lo, &hi, &act_obj,
                          &wh_obj, &c0_obj, &cseq_obj, &dout_obj, &dpx_obj, &dh0_obj,
                          &dc0_obj))
        return NULL;
    Py_buffer *act = take_float(&b, act_obj, 0, 3, fn, "act", &dtype);
    if (!act || lstm_seq_sizes(fn, &s, gemm, ilp64, reverse, lo, hi, act) < 0)
        return fail(&b);
    s.dtype = dtype;
    size_t state = s.n * s.hidden, t = s.steps;
    Py_buffer *wh = take_like(&b, wh_obj, 0, fn, "wh", dtype, 4 * s.hidden * s.hidden);
    Py_buffer *c0 = wh ? take_like(&b, c0_obj, 0, fn, "c0", dtype, state) : NULL;
    Py_buffer *cseq = c0 ? take_like(&b, cseq_obj, 0, fn, "cseq", dtype, t * state) : NULL;
    Py_buffer *dout = cseq ? take_like(&b, dout_obj, 0, fn, "dout", dtype, (t + 1) * state)
                           : NULL;
    Py_buffer *dpx = dout ? take_like(&b, dpx_obj, 1, fn, "dpx", dtype, 4 * t * state) : NULL;
    Py_buffer *dh0 = dpx ? take_like(&b, dh0_obj, 1, fn, "dh0", dtype, state) : NULL;
    Py_buffer *dc0 = dh0 ? take_like(&b, dc0_obj, 1, fn, "dc0", dtype, state) : NULL;
    if (!dc0)
        return fail(&b);
    s.act = act->buf, s.wh = wh->buf, s.c0 = c0->buf, s.cseq = cseq->buf;
    s.dout = dout->buf, s.dpx = dpx->buf, s.dh0 = dh0->buf, s.dc0 = dc0->buf;
    return lstm_seq_run(&b, mg_lstm_sequence_backward, &s);
}

/* gru_cell(kind, h, act, out, a, b, dh, nthreads): h (N, H) sets the sizes.  Kind 0
 * (forward) reads a = i2h and b = h2h (N, 3H), writes act (N, 4H) and out (N, H) = h';
 * kind 1 (backward) reads act and out = dout (N, H), writes a = di2h, b = dh2h (N, 3H)
 * and dh (N, H); dh is None in the forward. */
static PyObject *py_gru_cell(PyObject *self, PyObject *args)
{
    static const char *fn = "gru_cell";
    PyObject *h_obj, *act_obj, *out_obj, *a_obj, *b_obj, *dh_obj;
    int kind, nthreads, dtype;
    mg_buffers b = {.held = 0};
    mg_gru_args s;
    if (!PyArg_ParseTuple(args, "iOOOOOOi", &kind, &h_obj, &act_obj, &out_obj, &a_obj, &b_obj,
                          &dh_obj, &nthreads))
        return NULL;
    if (kind != 0 && kind != 1)
        return PyErr_Format(PyExc_ValueError, "%s: kind must be 0 or 1, got %d", fn, kind);
    int back = kind == 1;
    Py_buffer *h = take_float(&b, h_obj, 0, 2, fn, "h", &dtype);
    if (!h)
        return fail(&b);
    s.dtype = dtype, s.n = (size_t)h->shape[0], s.hidden = (size_t)h->shape[1];
    size_t state = s.n * s.hidden, gates = 3 * state;
    Py_buffer *act = take_like(&b, act_obj, !back, fn, "act", dtype, 4 * state);
    Py_buffer *out = act ? take_like(&b, out_obj, !back, fn, back ? "dout" : "out", dtype,
                                     state) : NULL;
    Py_buffer *x = out ? take_like(&b, a_obj, back, fn, back ? "di2h" : "i2h", dtype, gates)
                       : NULL;
    Py_buffer *y = x ? take_like(&b, b_obj, back, fn, back ? "dh2h" : "h2h", dtype, gates)
                     : NULL;
    Py_buffer *dh = y && back ? take_like(&b, dh_obj, 1, fn, "dh", dtype, state) : NULL;
    if (!y || (back && !dh))
        return fail(&b);
    s.h = h->buf, s.act = act->buf;
    s.out = back ? NULL : out->buf, s.dout = back ? out->buf : NULL;
    s.i2h = back ? NULL : x->buf, s.h2h = back ? NULL : y->buf;
    s.di2h = back ? x->buf : NULL, s.dh2h = back ? y->buf : NULL, s.dh = back ? dh->buf : NULL;
    return run_layer(&b, s.n, nthreads, mg_gru_task, &s);
}

/* softmax(kind, x, dy, label, stats, out, nthreads): x (rows, width) sets the sizes: the
 * data, or for the backward kinds of softmax/log_softmax y, their output.  dy is the
 * output's gradient (CE backward: dloss, one per row); label (int32, one per row) and stats
 * (rows, 2) are the CE kinds'; the arguments a kind does not use are None.  The labels are
 * checked here: the kernel indexes rows with them. */
static PyObject *py_softmax(PyObject *self, PyObject *args)
{
    static const char *fn = "softmax";
    PyObject *x_obj, *dy_obj, *label_obj, *stats_obj, *out_obj;
    int kind, nthreads, dtype;
    mg_buffers b = {.held = 0};
    mg_softmax_args s = {0};
    if (!PyArg_ParseTuple(args, "iOOOOOi", &kind, &x_obj, &dy_obj, &label_obj, &stats_obj,
                          &out_obj, &nthreads))
        return NULL;
    if (kind < MG_SM_FORWARD || kind > MG_SM_CE_BACKWARD)
        return PyErr_Format(PyExc_ValueError, "%s: kind must be 0..5, got %d", fn, kind);
    Py_buffer *x = take_float(&b, x_obj, 0, 2, fn, "x", &dtype);
    if (!x)
        return fail(&b);
    s.dtype = dtype, s.kind = kind, s.x = x->buf;
    s.rows = (size_t)x->shape[0], s.width = (size_t)x->shape[1];
    if (s.width == 0 || s.width > INT32_MAX) {
        PyErr_Format(PyExc_ValueError, "%s: rows must have 1 to %d values, got %zu", fn,
                     INT32_MAX, s.width);
        return fail(&b);
    }
    int ce = kind >= MG_SM_CE_FORWARD;
    int back = kind == MG_SM_BACKWARD || kind == MG_SM_LOG_BACKWARD || kind == MG_SM_CE_BACKWARD;
    size_t all = s.rows * s.width;
    if (back) {
        Py_buffer *dy = take_like(&b, dy_obj, 0, fn, ce ? "dloss" : "dy", dtype,
                                  ce ? s.rows : all);
        if (!dy)
            return fail(&b);
        s.dy = dy->buf;
    }
    if (ce) {
        Py_buffer *label = take_like(&b, label_obj, 0, fn, "label", -1, s.rows);
        Py_buffer *stats = label ? take_like(&b, stats_obj, kind == MG_SM_CE_FORWARD, fn,
                                             "stats", dtype, 2 * s.rows) : NULL;
        if (!stats)
            return fail(&b);
        s.label = (const int32_t *)label->buf, s.stats = stats->buf;
        for (size_t r = 0; r < s.rows; r++)
            if (s.label[r] < 0 || (size_t)s.label[r] >= s.width) {
                PyErr_Format(PyExc_ValueError, "%s: label[%zu] = %d is outside [0, %zu)", fn,
                             r, (int)s.label[r], s.width);
                return fail(&b);
            }
    }
    Py_buffer *out = take_like(&b, out_obj, 1, fn, "out", dtype,
                               kind == MG_SM_CE_FORWARD ? s.rows : all);
    if (!out)
        return fail(&b);
    s.out = out->buf;
    return run_layer(&b, s.rows, nthreads, mg_softmax_task, &s);
}

/* batch_norm(kind, x, dy, mean, a, b, k, out, s1, s2, nthreads): x is (outer, C, inner);
 * the arguments a kind does not use are None. */
static PyObject *py_batch_norm(PyObject *self, PyObject *args)
{
    static const char *fn = "batch_norm";
    static const mg_range_fn tasks[4] = {mg_bn_stats_task, mg_bn_forward_task,
                                         mg_bn_sums_task, mg_bn_backward_task};
    static const char *names[] = {"dy", "mean", "a", "b", "k", "out", "s1", "s2"};
    PyObject *x_obj, *obj[8];
    int kind, nthreads, dtype;
    mg_buffers b = {.held = 0};
    mg_bn_args s = {0};
    if (!PyArg_ParseTuple(args, "iOOOOOOOOOi", &kind, &x_obj, &obj[0], &obj[1], &obj[2],
                          &obj[3], &obj[4], &obj[5], &obj[6], &obj[7], &nthreads))
        return NULL;
    if (kind < 0 || kind > 3)
        return PyErr_Format(PyExc_ValueError, "%s: kind must be 0..3, got %d", fn, kind);
    Py_buffer *x = take_float(&b, x_obj, 0, 3, fn, "x", &dtype);
    if (!x)
        return fail(&b);
    s.dtype = dtype, s.outer = (size_t)x->shape[0], s.c = (size_t)x->shape[1];
    s.inner = (size_t)x->shape[2], s.x = x->buf;
    /* which of dy, mean, a, b, k, out, s1, s2 each kind needs */
    static const char uses[4][9] = {"00000011", "01110100", "11000011", "11111100"};
    const void **in[5] = {&s.dy, &s.mean, &s.a, &s.b, &s.k};
    s.dy = s.mean = s.a = s.b = s.k = NULL, s.out = NULL, s.s1 = s.s2 = NULL;
    for (int i = 0; i < 8; i++) {
        if (uses[kind][i] == '0')
            continue;
        if (b.held == 8) {
            PyErr_Format(PyExc_RuntimeError, "%s: too many buffers", fn);
            return fail(&b);
        }
        int per_channel = i >= 1 && i <= 4, result = i >= 6;
        size_t n = per_channel || result ? s.c : (size_t)count(x);
        Py_buffer *v = take_like(&b, obj[i], i >= 5, fn, names[i], result ? MG_F64 : dtype, n);
        if (!v)
            return fail(&b);
        if (i < 5)
            *in[i] = v->buf;
        else if (i == 5)
            s.out = v->buf;
        else if (i == 6)
            s.s1 = (double *)v->buf;
        else
            s.s2 = (double *)v->buf;
    }
    return run_layer(&b, s.c, nthreads, tasks[kind], &s);
}

/* batch_norm_act(kind, x, dy, gamma, p, out, s1, s2, act, lo, hi, eps, nthreads): the fused
 * kernels on (outer, C, inner) x, p of 4*C values (mean, scale, shift, inv_std); kind 0
 * trains (writes p's rows 0, 1, 3; gamma may be None), 1 applies p, 2 and 3 give the
 * gradient with batch / given statistics.  The arguments a kind does not use are None. */
static PyObject *py_batch_norm_act(PyObject *self, PyObject *args)
{
    static const char *fn = "batch_norm_act";
    static const mg_range_fn tasks[4] = {mg_bn_train_task, mg_bn_apply_task, mg_bn_grad_task,
                                         mg_bn_grad_given_task};
    static const char *names[] = {"dy", "gamma", "p", "out", "s1", "s2"};
    /* which of dy, gamma, p, out, s1, s2 each kind needs ('o': gamma, optional) */
    static const char uses[4][7] = {"0o1111", "001100", "101111", "101111"};
    PyObject *x_obj, *obj[6];
    int kind, nthreads, dtype;
    mg_buffers b = {.held = 0};
    mg_bn_args s = {0};
    if (!PyArg_ParseTuple(args, "iOOOOOOOidddi", &kind, &x_obj, &obj[0], &obj[1], &obj[2],
                          &obj[3], &obj[4], &obj[5], &s.act, &s.lo, &s.hi, &s.eps, &nthreads))
        return NULL;
    if (kind < 0 || kind > 3)
        return PyErr_Format(PyExc_ValueError, "%s: kind must be 0..3, got %d", fn, kind);
    if (s.act < MG_ACT_NONE || s.act > MG_ACT_CLIP)
        return PyErr_Format(PyExc_ValueError, "%s: act must be 0 (none), 1 (relu) or 2 (clip), "
                            "got %d", fn, s.act);
    Py_buffer *x = take_float(&b, x_obj, 0, 3, fn, "x", &dtype);
    if (!x)
        return fail(&b);
    s.dtype = dtype, s.outer = (size_t)x->shape[0], s.c = (size_t)x->shape[1];
    s.inner = (size_t)x->shape[2], s.x = x->buf;
    for (int i = 0; i < 6; i++) {
        if (uses[kind][i] == '0' || (uses[kind][i] == 'o' && obj[i] == Py_None))
            continue;
        int writable = i >= 3 || (i == 2 && kind == 0), result = i >= 4;
        size_t n = i == 0 || i == 3 ? (size_t)count(x) : i == 2 ? 4 * s.c : s.c;
        Py_buffer *v = take_like(&b, obj[i], writable, fn, names[i], result ? MG_F64 : dtype, n);
        if (!v)
            return fail(&b);
        void *buf = v->buf;
        if (i == 0)
            s.dy = buf;
        else if (i == 1)
            s.gamma = buf;
        else if (i == 2)
            s.p = buf;
        else if (i == 3)
            s.out = buf;
        else if (i == 4)
            s.s1 = (double *)buf;
        else
            s.s2 = (double *)buf;
    }
    return run_layer(&b, s.c, nthreads, tasks[kind], &s);
}

static PyObject *py_sgd_update(PyObject *self, PyObject *args)
{
    static const char *fn = "sgd_update";
    PyObject *w_obj, *grad_obj, *mom_obj;
    int nthreads, dtype;
    mg_buffers b = {.held = 0};
    mg_sgd_args a;
    if (!PyArg_ParseTuple(args, "OOOdddddi", &w_obj, &grad_obj, &mom_obj, &a.lr, &a.wd,
                          &a.momentum, &a.rescale, &a.clip, &nthreads))
        return NULL;
    Py_buffer *w = take_float(&b, w_obj, 1, 0, fn, "weight", &dtype);
    if (!w)
        return fail(&b);
    a.dtype = dtype, a.n = (size_t)count(w), a.w = w->buf, a.mom = NULL;
    Py_buffer *grad = take_like(&b, grad_obj, 0, fn, "grad", dtype, a.n);
    if (!grad)
        return fail(&b);
    a.grad = grad->buf;
    if (mom_obj != Py_None) {
        Py_buffer *mom = take_like(&b, mom_obj, 1, fn, "mom", dtype, a.n);
        if (!mom)
            return fail(&b);
        a.mom = mom->buf;
    }
    return run_layer(&b, (a.n + MG_SGD_BLOCK - 1) / MG_SGD_BLOCK, nthreads, mg_sgd_task, &a);
}

/* relu(x, dy, out, nthreads) and clip(x, dy, out, lo, hi, nthreads) share their buffers:
 * forward when dy is None, else the gradient */
static PyObject *relu_like(const char *fn, PyObject *x_obj, PyObject *dy_obj,
                           PyObject *out_obj, int nthreads, mg_relu_args *a)
{
    int dtype;
    mg_buffers b = {.held = 0};
    Py_buffer *x = take_float(&b, x_obj, 0, 0, fn, "x", &dtype);
    if (!x)
        return fail(&b);
    a->dtype = dtype, a->n = (size_t)count(x), a->x = x->buf, a->dy = NULL;
    if (dy_obj != Py_None) {
        Py_buffer *dy = take_like(&b, dy_obj, 0, fn, "dy", dtype, a->n);
        if (!dy)
            return fail(&b);
        a->dy = dy->buf;
    }
    Py_buffer *out = take_like(&b, out_obj, 1, fn, "out", dtype, a->n);
    if (!out)
        return fail(&b);
    a->out = out->buf;
    return run_layer(&b, (a->n + MG_RELU_BLOCK - 1) / MG_RELU_BLOCK, nthreads,
                     a->dy ? mg_relu_back_task : mg_relu_task, a);
}

static PyObject *py_relu(PyObject *self, PyObject *args)
{
    PyObject *x_obj, *dy_obj, *out_obj;
    int nthreads;
    mg_relu_args a = {.clip = 0};
    if (!PyArg_ParseTuple(args, "OOOi", &x_obj, &dy_obj, &out_obj, &nthreads))
        return NULL;
    return relu_like("relu", x_obj, dy_obj, out_obj, nthreads, &a);
}

static PyObject *py_clip(PyObject *self, PyObject *args)
{
    PyObject *x_obj, *dy_obj, *out_obj;
    int nthreads;
    mg_relu_args a = {.clip = 1};
    if (!PyArg_ParseTuple(args, "OOOddi", &x_obj, &dy_obj, &out_obj, &a.lo, &a.hi, &nthreads))
        return NULL;
    return relu_like("clip", x_obj, dy_obj, out_obj, nthreads, &a);
}

/* ---- row kernels (rows.c) ------------------------------------------------------------ */

static int is_int64_buffer(const Py_buffer *v)
{
    const char *f = v->format ? v->format : "B";
    if (*f == '@' || *f == '=' || *f == '<')
        f++;
    return v->itemsize == 8 && (strcmp(f, "q") == 0 || strcmp(f, "l") == 0);
}

/* An int64 buffer of row ids; NULL with an exception on failure. */
static Py_buffer *take_ids(mg_buffers *b, PyObject *obj, const char *fn, const char *name)
{
    Py_buffer *v = &b->v[b->held];
    if (get_buffer(obj, v, 0, fn, name) < 0)
        return NULL;
    b->held++;
    if (!is_int64_buffer(v)) {
        PyErr_Format(PyExc_TypeError, "%s: %s must hold int64 row ids, got format '%s'", fn,
                     name, v->format ? v->format : "B");
        return NULL;
    }
    return v;
}

/* The row length of a table of `rows` rows held in v; -1 with an exception if it is not one. */
static Py_ssize_t table_width(const Py_buffer *v, Py_ssize_t rows, const char *fn,
                              const char *name)
{
    if (rows < 1 || count(v) % rows != 0) {
        PyErr_Format(PyExc_ValueError, "%s: %s holds %zd values, not a table of %zd rows", fn,
                     name, count(v), rows);
        return -1;
    }
    return count(v) / rows;
}

static PyObject *bad_row(const char *fn, const int64_t *ids, int64_t i, Py_ssize_t rows)
{
    return PyErr_Format(PyExc_ValueError,
                        "%s: row id %lld at position %lld is outside the table's %zd rows (or "
                        "not above the id before it)", fn, (long long)ids[i], (long long)i,
                        rows);
}

/* rows_sum(ids_list, values_list, width, out_ids, out) -> rows written */
static PyObject *py_rows_sum(PyObject *self, PyObject *args)
{
    static const char *fn = "rows_sum";
    PyObject *ids_obj, *vals_obj, *out_ids_obj, *out_obj;
    Py_ssize_t width;
    if (!PyArg_ParseTuple(args, "OOnOO", &ids_obj, &vals_obj, &width, &out_ids_obj, &out_obj))
        return NULL;
    PyObject *ids_seq = PySequence_Fast(ids_obj, "rows_sum: ids must be a sequence");
    PyObject *vals_seq = ids_seq ? PySequence_Fast(vals_obj, "rows_sum: values must be a "
                                                             "sequence") : NULL;
    PyObject *result = NULL;
    Py_ssize_t k = 0;
    Py_buffer *views = NULL;    /* out_ids, out, then ids and values of each part */
    const int64_t **ids = NULL;
    const void **vals = NULL;
    size_t *counts = NULL, total = 0;
    int dtype, dt;
    if (!vals_seq)
        goto done;
    k = PySequence_Fast_GET_SIZE(ids_seq);
    if (k < 1 || PySequence_Fast_GET_SIZE(vals_seq) != k || width < 1) {
        PyErr_Format(PyExc_ValueError, "%s: need one values array per ids array (at least "
                     "one) and a row length >= 1", fn);
        goto done;
    }
    views = PyMem_Calloc((size_t)(2 * k + 2), sizeof(Py_buffer));
    ids = PyMem_Calloc((size_t)k, sizeof(int64_t *));
    vals = PyMem_Calloc((size_t)k, sizeof(void *));
    counts = PyMem_Calloc((size_t)k, sizeof(size_t));
    if (!views || !ids || !vals || !counts) {
        PyErr_NoMemory();
        goto done;
    }
    if (get_buffer(out_ids_obj, &views[0], 1, fn, "out_ids") < 0 ||
        get_float_buffer(out_obj, &views[1], 1, fn, "out", &dtype) < 0)
        goto done;
    for (Py_ssize_t p = 0; p < k; p++) {
        Py_buffer *iv = &views[2 + 2 * p], *vv = &views[3 + 2 * p];
        if (get_buffer(PySequence_Fast_GET_ITEM(ids_seq, p), iv, 0, fn, "ids") < 0 ||
            get_float_buffer(PySequence_Fast_GET_ITEM(vals_seq, p), vv, 0, fn, "values",
                             &dt) < 0)
            goto done;
        if (!is_int64_buffer(iv) || dt != dtype || count(vv) != count(iv) * width) {
            PyErr_Format(PyExc_ValueError, "%s: part %zd: ids must be int64 and its values "
                         "(%zd ids x %zd) of out's dtype", fn, p, count(iv), width);
            goto done;
        }
        ids[p] = iv->buf, vals[p] = vv->buf, counts[p] = (size_t)count(iv);
        total += counts[p];
    }
    if (!is_int64_buffer(&views[0]) || (size_t)count(&views[0]) < total ||
        (size_t)count(&views[1]) < total * (size_t)width) {
        PyErr_Format(PyExc_ValueError, "%s: out_ids (int64) and out need room for %zu rows",
                     fn, total);
        goto done;
    }
    mg_rows_sum_args a = {dtype, (size_t)width, (size_t)k, ids, counts, vals, views[0].buf,
                          views[1].buf};
    size_t n;
    Py_BEGIN_ALLOW_THREADS
    n = mg_rows_sum(&a);
    Py_END_ALLOW_THREADS
    result = n == (size_t)-1 ? PyErr_NoMemory() : PyLong_FromSize_t(n);
done:
    for (Py_ssize_t j = 0; views && j < 2 * k + 2; j++)
        if (views[j].obj)
            PyBuffer_Release(&views[j]);
    PyMem_Free(views);
    PyMem_Free(ids);
    PyMem_Free(vals);
    PyMem_Free(counts);
    Py_XDECREF(ids_seq);
    Py_XDECREF(vals_seq);
    return result;
}

/* rows_take(table, rows, ids, out): out[i] = table row ids[i] */
static PyObject *py_rows_take(PyObject *self, PyObject *args)
{
    static const char *fn = "rows_take";
    PyObject *table_obj, *ids_obj, *out_obj;
    Py_ssize_t rows;
    mg_buffers b = {.held = 0};
    if (!PyArg_ParseTuple(args, "OnOO", &table_obj, &rows, &ids_obj, &out_obj))
        return NULL;
    Py_buffer *table = &b.v[b.held];
    if (get_buffer(table_obj, table, 0, fn, "table") < 0)
        return NULL;
    b.held++;
    Py_ssize_t width = table_width(table, rows, fn, "table");
    Py_buffer *ids = width >= 0 ? take_ids(&b, ids_obj, fn, "ids") : NULL;
    if (!ids)
        return fail(&b);
    Py_buffer *out = &b.v[b.held];
    if (get_buffer(out_obj, out, 1, fn, "out") < 0)
        return fail(&b);
    b.held++;
    size_t row_bytes = (size_t)width * (size_t)table->itemsize, k = (size_t)count(ids);
    if (out->itemsize != table->itemsize || (size_t)out->len != k * row_bytes) {
        PyErr_Format(PyExc_ValueError, "%s: out must hold %zu rows of the table's items", fn, k);
        return fail(&b);
    }
    int64_t bad;
    Py_BEGIN_ALLOW_THREADS
    bad = mg_rows_take(table->buf, (size_t)rows, row_bytes, ids->buf, k, out->buf);
    Py_END_ALLOW_THREADS
    if (bad >= 0) {
        bad_row(fn, ids->buf, bad, rows);
        return fail(&b);
    }
    release_all(&b);
    Py_RETURN_NONE;
}

/* rows_add_at(table, rows, ids, values): table[ids[i]] += values[i], in order */
static PyObject *py_rows_add_at(PyObject *self, PyObject *args)
{
    static const char *fn = "rows_add_at";
    PyObject *table_obj, *ids_obj, *values_obj;
    Py_ssize_t rows;
    int dtype;
    mg_buffers b = {.held = 0};
    if (!PyArg_ParseTuple(args, "OnOO", &table_obj, &rows, &ids_obj, &values_obj))
        return NULL;
    Py_buffer *table = &b.v[b.held];
    if (get_float_buffer(table_obj, table, 1, fn, "table", &dtype) < 0)
        return NULL;
    b.held++;
    Py_ssize_t width = table_width(table, rows, fn, "table");
    Py_buffer *ids = width >= 0 ? take_ids(&b, ids_obj, fn, "ids") : NULL;
    Py_buffer *values = ids ? take_like(&b, values_obj, 0, fn, "values", dtype,
                                        (size_t)count(ids) * (size_t)width) : NULL;
    if (!values)
        return fail(&b);
    int64_t bad;
    Py_BEGIN_ALLOW_THREADS
    bad = mg_rows_add_at(dtype, table->buf, (size_t)rows, (size_t)width, ids->buf,
                         (size_t)count(ids), values->buf);
    Py_END_ALLOW_THREADS
    if (bad >= 0) {
        bad_row(fn, ids->buf, bad, rows);
        return fail(&b);
    }
    release_all(&b);
    Py_RETURN_NONE;
}

/* rows_sgd(weight, rows, ids, grad, mom_or_None, lr, wd, momentum, rescale, clip) */
static PyObject *py_rows_sgd(PyObject *self, PyObject *args)
{
    static const char *fn = "rows_sgd";
    PyObject *w_obj, *ids_obj, *grad_obj, *mom_obj;
    Py_ssize_t rows;
    int dtype;
    mg_buffers b = {.held = 0};
    mg_sgd_args a;
    if (!PyArg_ParseTuple(args, "OnOOOddddd", &w_obj, &rows, &ids_obj, &grad_obj, &mom_obj,
                          &a.lr, &a.wd, &a.momentum, &a.rescale, &a.clip))
        return NULL;
    Py_buffer *w = take_float(&b, w_obj, 1, 0, fn, "weight", &dtype);
    if (!w)
        return fail(&b);
    Py_ssize_t width = table_width(w, rows, fn, "weight");
    Py_buffer *ids = width >= 0 ? take_ids(&b, ids_obj, fn, "ids") : NULL;
    if (!ids)
        return fail(&b);
    size_t k = (size_t)count(ids);
    Py_buffer *grad = take_like(&b, grad_obj, 0, fn, "grad", dtype, k * (size_t)width);
    if (!grad)
        return fail(&b);
    void *mom = NULL;
    if (mom_obj != Py_None) {
        Py_buffer *m = take_like(&b, mom_obj, 1, fn, "mom", dtype, (size_t)count(w));
        if (!m)
            return fail(&b);
        mom = m->buf;
    }
    a.dtype = dtype;
    int64_t bad;
    Py_BEGIN_ALLOW_THREADS
    bad = mg_rows_sgd(&a, w->buf, mom, (size_t)rows, (size_t)width, ids->buf, k, grad->buf);
    Py_END_ALLOW_THREADS
    if (bad >= 0) {
        bad_row(fn, ids->buf, bad, rows);
        return fail(&b);
    }
    release_all(&b);
    Py_RETURN_NONE;
}

/* rows_adam(weight, rows, ids, grad, mean, var, lr, beta1, beta2, epsilon, wd, rescale, clip) */
static PyObject *py_rows_adam(PyObject *self, PyObject *args)
{
    static const char *fn = "rows_adam";
    PyObject *w_obj, *ids_obj, *grad_obj, *mean_obj, *var_obj;
    Py_ssize_t rows;
    int dtype;
    mg_buffers b = {.held = 0};
    mg_adam_args a;
    if (!PyArg_ParseTuple(args, "OnOOOOddddddd", &w_obj, &rows, &ids_obj, &grad_obj, &mean_obj,
                          &var_obj, &a.lr, &a.beta1, &a.beta2, &a.epsilon, &a.wd, &a.rescale,
                          &a.clip))
        return NULL;
    Py_buffer *w = take_float(&b, w_obj, 1, 0, fn, "weight", &dtype);
    if (!w)
        return fail(&b);
    Py_ssize_t width = table_width(w, rows, fn, "weight");
    Py_buffer *ids = width >= 0 ? take_ids(&b, ids_obj, fn, "ids") : NULL;
    if (!ids)
        return fail(&b);
    size_t k = (size_t)count(ids), n = (size_t)count(w);
    Py_buffer *grad = take_like(&b, grad_obj, 0, fn, "grad", dtype, k * (size_t)width);
    Py_buffer *mean = grad ? take_like(&b, mean_obj, 1, fn, "mean", dtype, n) : NULL;
    Py_buffer *var = mean ? take_like(&b, var_obj, 1, fn, "var", dtype, n) : NULL;
    if (!var)
        return fail(&b);
    a.dtype = dtype;
    int64_t bad;
    Py_BEGIN_ALLOW_THREADS
    bad = mg_rows_adam(&a, w->buf, mean->buf, var->buf, (size_t)rows, (size_t)width, ids->buf,
                       k, grad->buf);
    Py_END_ALLOW_THREADS
    if (bad >= 0) {
        bad_row(fn, ids->buf, bad, rows);
        return fail(&b);
    }
    release_all(&b);
    Py_RETURN_NONE;
}

static PyObject *py_tuning(PyObject *self, PyObject *unused)
{
    return Py_BuildValue("{s:O,s:O,s:n}", "avx2", mg_cpu.avx2 ? Py_True : Py_False, "f16c",
                         mg_cpu.f16c ? Py_True : Py_False, "stream_bytes",
                         (Py_ssize_t)mg_cpu.stream_bytes);
}

/* For tests: turn SIMD paths off (never on where the CPU lacks them), move the
 * non-temporal store bound.  Returns the previous settings. */
static PyObject *py_set_tuning(PyObject *self, PyObject *args, PyObject *kwargs)
{
    static char *names[] = {"avx2", "f16c", "stream_bytes", NULL};
    int avx2 = -1, f16c = -1;
    Py_ssize_t stream_bytes = -1;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|$ppn", names, &avx2, &f16c, &stream_bytes))
        return NULL;
    PyObject *before = py_tuning(self, NULL);
    mg_cpu_features detected = mg_cpu;
    mg_cpu_init();
    if (avx2 >= 0)
        mg_cpu.avx2 = mg_cpu.avx2 && avx2;
    else
        mg_cpu.avx2 = detected.avx2;
    if (f16c >= 0)
        mg_cpu.f16c = mg_cpu.f16c && f16c;
    else
        mg_cpu.f16c = detected.f16c;
    mg_cpu.stream_bytes = stream_bytes >= 0 ? (size_t)stream_bytes : detected.stream_bytes;
    return before;
}

static PyMethodDef methods[] = {
    {"sum_into", py_sum_into, METH_VARARGS, "sum_into(out, arrays, accumulate, nthreads)"},
    {"scale_add", py_scale_add, METH_VARARGS, "scale_add(out, a, alpha, beta, nthreads)"},
    {"quantize_2bit", py_quantize_2bit, METH_VARARGS,
     "quantize_2bit(grad, residual, out, threshold, nthreads)"},
    {"dequantize_2bit", py_dequantize_2bit, METH_VARARGS,
     "dequantize_2bit(packed, out, lut, add, nthreads)"},
    {"f16_to_f32", py_f16_to_f32, METH_VARARGS, "f16_to_f32(src, out, nthreads)"},
    {"f32_to_f16", py_f32_to_f16, METH_VARARGS, "f32_to_f16(src, out, nthreads)"},
    {"im2col", py_im2col, METH_VARARGS,
     "im2col(x, out, kh, kw, sh, sw, ph, pw, dh, dw, nthreads)"},
    {"col2im", py_col2im, METH_VARARGS,
     "col2im(cols, out, kh, kw, sh, sw, ph, pw, dh, dw, nthreads)"},
    {"swap01", py_swap01, METH_VARARGS, "swap01(src, bias_or_None, out, nthreads)"},
    {"max_pool2d", py_max_pool2d, METH_VARARGS,
     "max_pool2d(x, out, argmax, kh, kw, sh, sw, ph, pw, nthreads)"},
    {"max_pool2d_backward", py_max_pool2d_backward, METH_VARARGS,
     "max_pool2d_backward(dy, argmax, out, nthreads)"},
    {"winograd", py_winograd, METH_VARARGS,
     "winograd(kind, src, out, bias_or_None, ph, pw, tile, nthreads)"},
    {"depthwise", py_depthwise, METH_VARARGS,
     "depthwise(kind, x, y, w, bias_or_None, kh, kw, sh, sw, ph, pw, dh, dw, nthreads, "
     "blocked=False)"},
    {"lstm_sequence_forward", py_lstm_sequence_forward, METH_VARARGS,
     "lstm_sequence_forward(gemm, ilp64, reverse, lo, hi, px, wh, h0, c0, out, act, cseq)"},
    {"lstm_sequence_backward", py_lstm_sequence_backward, METH_VARARGS,
     "lstm_sequence_backward(gemm, ilp64, reverse, lo, hi, act, wh, c0, cseq, dout, dpx, "
     "dh0, dc0)"},
    {"lstm_cell", py_lstm_cell, METH_VARARGS,
     "lstm_cell(kind, c, act, out, i2h_or_dout, h2h_or_da, dc_or_None, nthreads)"},
    {"softmax", py_softmax, METH_VARARGS,
     "softmax(kind, x, dy_or_None, label_or_None, stats_or_None, out, nthreads)"},
    {"gru_cell", py_gru_cell, METH_VARARGS,
     "gru_cell(kind, h, act, out_or_dout, i2h_or_di2h, h2h_or_dh2h, dh_or_None, nthreads)"},
    {"batch_norm", py_batch_norm, METH_VARARGS,
     "batch_norm(kind, x, dy, mean, a, b, k, out, s1, s2, nthreads)"},
    {"batch_norm_act", py_batch_norm_act, METH_VARARGS,
     "batch_norm_act(kind, x, dy, gamma, p, out, s1, s2, act, lo, hi, eps, nthreads)"},
    {"relu", py_relu, METH_VARARGS, "relu(x, dy_or_None, out, nthreads)"},
    {"clip", py_clip, METH_VARARGS, "clip(x, dy_or_None, out, lo, hi, nthreads)"},
    {"sgd_update", py_sgd_update, METH_VARARGS,
     "sgd_update(weight, grad, mom_or_None, lr, wd, momentum, rescale, clip, nthreads)"},
    {"rows_sum", py_rows_sum, METH_VARARGS, "rows_sum(ids_list, values_list, width, out_ids, out) -> rows"},
    {"rows_take", py_rows_take, METH_VARARGS, "rows_take(table, rows, ids, out)"},
    {"rows_add_at", py_rows_add_at, METH_VARARGS, "rows_add_at(table, rows, ids, values)"},
    {"rows_sgd", py_rows_sgd, METH_VARARGS,
     "rows_sgd(weight, rows, ids, grad, mom_or_None, lr, wd, momentum, rescale, clip)"},
    {"rows_adam", py_rows_adam, METH_VARARGS,
     "rows_adam(weight, rows, ids, grad, mean, var, lr, beta1, beta2, epsilon, wd, rescale, "
     "clip)"},
    {"tuning", py_tuning, METH_NOARGS, "SIMD paths in use and the streaming-store bound."},
    {"set_tuning", (PyCFunction)(void (*)(void))py_set_tuning, METH_VARARGS | METH_KEYWORDS,
     "set_tuning(*, avx2, f16c, stream_bytes) -> previous settings (for tests)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "minigluon_ext._kernels",
    "Raw C kernels of minigluon_ext; call them through minigluon_ext, which validates.", -1,
    methods,
};

PyMODINIT_FUNC PyInit__kernels(void)
{
    mg_cpu_init();
    PyObject *m = PyModule_Create(&module);
    if (m && (PyModule_AddIntConstant(m, "GRAIN", MG_GRAIN) < 0 ||
              PyModule_AddIntConstant(m, "MAX_THREADS", MG_MAX_THREADS) < 0)) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
