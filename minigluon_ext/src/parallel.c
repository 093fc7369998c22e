/* Split an element range over pthreads; detect the CPU's features once.
 *
 * Threads are started per call: kernels only go parallel above the big-array bound
 * (a million elements by default, about a millisecond of work), where starting a thread
 * costs a few percent at most, and no pool has to outlive or survive a fork.
 */
#include <pthread.h>

#include "mgext.h"

mg_cpu_features mg_cpu;

void mg_cpu_init(void)
{
    mg_cpu.stream_bytes = (size_t)16 << 20; /* about an L3's worth: past it out is cold anyway */
#if MG_X86
    __builtin_cpu_init();
    mg_cpu.avx2 = __builtin_cpu_supports("avx2");
    mg_cpu.f16c = __builtin_cpu_supports("f16c") && __builtin_cpu_supports("avx");
#endif
}

typedef struct {
    mg_range_fn fn;
    void *ctx;
    size_t begin, end;
} mg_task;

static void *run_task(void *p)
{
    mg_task *t = (mg_task *)p;
    t->fn(t->ctx, t->begin, t->end);
    return NULL;
}

void mg_parallel_for(size_t n, int nthreads, mg_range_fn fn, void *ctx)
{
    size_t grains = (n + MG_GRAIN - 1) / MG_GRAIN;
    size_t parts = nthreads < 1 ? 1 : (size_t)nthreads;
    if (parts > MG_MAX_THREADS)
        parts = MG_MAX_THREADS;
    if (parts > grains)
        parts = grains;
    if (parts <= 1) {
        if (n)
            fn(ctx, 0, n);
        return;
    }
    size_t step = (grains + parts - 1) / parts * MG_GRAIN;
    mg_task tasks[MG_MAX_THREADS];
    pthread_t ids[MG_MAX_THREADS];
    int started[MG_MAX_THREADS];
    size_t used = 0;
    for (size_t b = 0; b < n; b += step, used++) {
        tasks[used].fn = fn;
        tasks[used].ctx = ctx;
        tasks[used].begin = b;
        tasks[used].end = b + step < n ? b + step : n;
    }
    for (size_t i = 1; i < used; i++)
        started[i] = pthread_create(&ids[i], NULL, run_task, &tasks[i]) == 0;
    run_task(&tasks[0]);
    for (size_t i = 1; i < used; i++) {
        if (started[i])
            pthread_join(ids[i], NULL);
        else
            run_task(&tasks[i]); /* no thread to be had: do the part here */
    }
}
