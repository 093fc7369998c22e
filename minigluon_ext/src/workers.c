/* A pool of persistent worker threads for the layer kernels.
 *
 * Layer kernels run a few hundred times per training step on a few megabytes each, so
 * starting threads per call (as mg_parallel_for does for the kvstore's big arrays) would
 * cost more than the split saves.  Workers are started on first use and kept; between
 * tasks each polls for a short while (kernels often follow each other), then sleeps on its
 * own semaphore, leaving the cores to BLAS during a matmul.
 *
 * A task is cut into a few chunks per thread that the caller and the workers claim one at
 * a time, so on a loaded machine, where a worker may wait long for a core, the caller does
 * the work it would have waited for; it only waits for chunks already running elsewhere.
 * The claim word holds the task's generation in its high half, so a worker that wakes late
 * can never claim a chunk of a task that has ended.
 *
 * The caller too spins only briefly for chunks still running elsewhere, then sleeps on a
 * semaphore that the last chunk's thread posts.
 *
 * One task runs at a time: a caller that finds the pool busy (another Python thread in a
 * kernel) falls back to mg_parallel_for.  After fork() the child starts from an empty pool.
 */
#include <pthread.h>
#include <semaphore.h>
#include <time.h>

#include "layers.h"

#define POLL_NS 50000L   /* how long an idle worker polls before it sleeps */
#define CHUNKS_PER_THREAD 4

typedef struct {
    mg_range_fn fn;
    void *ctx;
    size_t items;
    uint32_t chunks;
} pool_task;

static pthread_mutex_t call_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t init_once_flag = PTHREAD_ONCE_INIT;
static int started;                   /* workers running; guarded by call_lock */
static sem_t wake[MG_MAX_THREADS];
static int sleeping[MG_MAX_THREADS];  /* atomic */
static uint64_t claim;                /* atomic: generation << 32 | next chunk */
static uint32_t done;                 /* atomic: chunks of the current task finished */
static sem_t finished;                /* posted when the last chunk ends while the caller sleeps */
static int caller_sleeping;           /* atomic */
static pool_task task;                /* written under call_lock before claim publishes it */

static inline uint32_t generation_of(uint64_t c) { return (uint32_t)(c >> 32); }

static inline void cpu_relax(void)
{
#if MG_X86
    __builtin_ia32_pause();
#endif
}

static long now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000L + t.tv_nsec;
}

/* Claim and run chunks of task `gen` until none is left (or the task is gone). */
static void run_chunks(uint32_t gen)
{
    for (;;) {
        uint64_t old = __atomic_load_n(&claim, __ATOMIC_ACQUIRE);
        if (generation_of(old) != gen || (uint32_t)old >= task.chunks)
            return;
        if (!__atomic_compare_exchange_n(&claim, &old, old + 1, 0, __ATOMIC_ACQ_REL,
                                         __ATOMIC_ACQUIRE))
            continue;
        /* chunk k of a live task: its fields stay put until `done` counts this chunk */
        size_t k = (uint32_t)old, n = task.chunks;
        size_t begin = task.items * k / n, end = task.items * (k + 1) / n;
        if (begin < end)
            task.fn(task.ctx, begin, end);
        /* after this add the caller may return and publish a new task: use only `n` */
        if (__atomic_add_fetch(&done, 1, __ATOMIC_SEQ_CST) == n &&
            __atomic_load_n(&caller_sleeping, __ATOMIC_SEQ_CST))
            sem_post(&finished);
    }
}

/* Wait until a task newer than `seen` is published; return its generation. */
static uint32_t next_task(int w, uint32_t seen)
{
    for (;;) {
        long until = now_ns() + POLL_NS;
        for (int i = 0;; i++) {
            uint32_t g = generation_of(__atomic_load_n(&claim, __ATOMIC_ACQUIRE));
            if (g != seen)
                return g;
            if ((i & 63) == 63 && now_ns() > until)
                break;
            cpu_relax();
        }
        /* announce the sleep, then look once more: a publisher either sees the flag and
         * posts, or published before this look */
        __atomic_store_n(&sleeping[w], 1, __ATOMIC_SEQ_CST);
        if (generation_of(__atomic_load_n(&claim, __ATOMIC_SEQ_CST)) == seen)
            while (sem_wait(&wake[w]) != 0) {
            }
        __atomic_store_n(&sleeping[w], 0, __ATOMIC_SEQ_CST);
    }
}

static void *worker(void *arg)
{
    int w = (int)(intptr_t)arg;
    /* a task published before this load is missed: its caller runs the chunks itself */
    uint32_t seen = generation_of(__atomic_load_n(&claim, __ATOMIC_ACQUIRE));
    for (;;) {
        seen = next_task(w, seen);
        run_chunks(seen);
    }
    return NULL;
}

static void child_after_fork(void)
{
    /* the workers did not survive the fork: start over */
    pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
    call_lock = fresh;
    sem_destroy(&finished);
    sem_init(&finished, 0, 0);
    caller_sleeping = 0;
    started = 0;
    claim = 0;
    done = 0;
}

static void init_once(void)
{
    sem_init(&finished, 0, 0);
    pthread_atfork(NULL, NULL, child_after_fork);
}

/* Start workers until `want` run (fewer if the system refuses); returns how many run. */
static int start_workers(int want)
{
    while (started < want) {
        pthread_t id;
        pthread_attr_t attr;
        if (sem_init(&wake[started], 0, 0) != 0)
            break;
        sleeping[started] = 0;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        pthread_attr_setstacksize(&attr, (size_t)256 << 10);
        int failed = pthread_create(&id, &attr, worker, (void *)(intptr_t)started);
        pthread_attr_destroy(&attr);
        if (failed) {
            sem_destroy(&wake[started]);
            break;
        }
        started++;
    }
    return started;
}

static void run_per_call(size_t items, int parts, mg_range_fn fn, void *ctx);

/* Wait until the other threads' chunks are done: spin briefly (a chunk already running
 * usually ends within microseconds), then sleep until the last one posts.  A caller that
 * spins or yields for long on a loaded machine takes the core from the very worker it
 * waits for. */
static void wait_for_chunks(uint32_t chunks)
{
    long until = now_ns() + POLL_NS;
    for (int i = 0; __atomic_load_n(&done, __ATOMIC_ACQUIRE) < chunks; i++) {
        if ((i & 63) == 63 && now_ns() > until) {
            /* announce the sleep, then look again: the last finisher either sees the flag
             * and posts, or finished before this look (a late post only wakes us early) */
            __atomic_store_n(&caller_sleeping, 1, __ATOMIC_SEQ_CST);
            while (__atomic_load_n(&done, __ATOMIC_SEQ_CST) < chunks)
                while (sem_wait(&finished) != 0) {
                }
            __atomic_store_n(&caller_sleeping, 0, __ATOMIC_SEQ_CST);
            return;
        }
        cpu_relax();
    }
}

void mg_parallel_items(size_t items, int nthreads, mg_range_fn fn, void *ctx)
{
    int parts = nthreads < 1 ? 1 : nthreads > MG_MAX_THREADS ? MG_MAX_THREADS : nthreads;
    if ((size_t)parts > items)
        parts = (int)items;
    if (parts <= 1) {
        if (items)
            fn(ctx, 0, items);
        return;
    }
    pthread_once(&init_once_flag, init_once);
    if (pthread_mutex_trylock(&call_lock) != 0) {
        run_per_call(items, parts, fn, ctx); /* another thread holds the pool */
        return;
    }
    int workers = start_workers(parts - 1);
    if (workers + 1 < parts)
        parts = workers + 1;
    size_t chunks = (size_t)parts * CHUNKS_PER_THREAD;
    task = (pool_task){fn, ctx, items, (uint32_t)(chunks < items ? chunks : items)};
    __atomic_store_n(&done, 0, __ATOMIC_RELAXED);
    uint32_t gen = generation_of(__atomic_load_n(&claim, __ATOMIC_RELAXED)) + 1;
    __atomic_store_n(&claim, (uint64_t)gen << 32, __ATOMIC_SEQ_CST);
    for (int w = 0; w < parts - 1; w++)
        if (__atomic_load_n(&sleeping[w], __ATOMIC_SEQ_CST))
            sem_post(&wake[w]);
    run_chunks(gen);
    wait_for_chunks(task.chunks);
    pthread_mutex_unlock(&call_lock);
}

/* The per-call threads of mg_parallel_for, on item ranges. */
typedef struct {
    mg_range_fn fn;
    void *ctx;
} items_ctx;

static void items_task(void *p, size_t begin, size_t end)
{
    items_ctx *c = (items_ctx *)p;
    c->fn(c->ctx, begin / MG_GRAIN, (end + MG_GRAIN - 1) / MG_GRAIN);
}

static void run_per_call(size_t items, int parts, mg_range_fn fn, void *ctx)
{
    /* mg_parallel_for cuts at multiples of MG_GRAIN: scale so that a grain is one item */
    items_ctx c = {fn, ctx};
    mg_parallel_for(items * MG_GRAIN, parts, items_task, &c);
}
