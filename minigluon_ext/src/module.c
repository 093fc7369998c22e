/* minigluon_ext._kernels: the CPython face of the C kernels.
 *
 * Callers (minigluon_ext/native.py) validate arguments first and give clear messages; this
 * layer checks again what memory safety depends on (C-contiguous, aligned, writable where
 * written, matching dtypes and lengths), so a direct call with bad buffers raises instead
 * of crashing.  The GIL is released while a kernel runs.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "mgext.h"

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
