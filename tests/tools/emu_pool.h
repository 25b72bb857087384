// The GPU emulators' block runner (tests/tools/gpu_emu.cc, gpu_emu_tc.cc):
// a block's n threads run on persistent pthreads, pool thread t always
// taking thread index t, started per block by a generation count and
// waited for by a countdown. Creating and joining n pthreads for every
// block, as the launchers did, was most of tests/t_gpu_emu.sh's time (4.5
// minutes of a 2-core build machine's suite, much of it in the kernel).
// The emulation itself is unchanged: each index still has its own thread,
// so barriers and shuffles keep their pthread_barrier semantics.
#ifndef PLUMB_TESTS_EMU_POOL_H
#define PLUMB_TESTS_EMU_POOL_H
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

struct emu_pool {
    pthread_mutex_t mu;
    pthread_cond_t go, done;
    unsigned created;            // pool threads so far (index 0..created-1)
    unsigned active;             // the current block's threads (index < active run it)
    unsigned left;               // of those, still running
    unsigned long gen;           // blocks started
    void (*fn)(void *, unsigned);
    void *ctx;
};
static emu_pool g_emu_pool = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, 0, 0,
                              nullptr, nullptr};

static void *emu_pool_worker(void *p)
{
    const unsigned t = (unsigned)(uintptr_t)p;
    emu_pool &P = g_emu_pool;
    pthread_mutex_lock(&P.mu);
    unsigned long seen = P.gen - 1; // created for the block being started: run it
    for (;;) {
        while (P.gen == seen) pthread_cond_wait(&P.go, &P.mu);
        seen = P.gen;
        if (t >= P.active) continue; // a smaller block: not this index
        void (*fn)(void *, unsigned) = P.fn;
        void *ctx = P.ctx;
        pthread_mutex_unlock(&P.mu);
        fn(ctx, t);
        pthread_mutex_lock(&P.mu);
        if (--P.left == 0) pthread_cond_signal(&P.done);
    }
    return nullptr;
}

// fn(ctx, t) for every t < n, each on its own pool thread; returns when all have
static void emu_pool_run(unsigned n, void (*fn)(void *, unsigned), void *ctx)
{
    emu_pool &P = g_emu_pool;
    pthread_mutex_lock(&P.mu);
    P.active = n, P.left = n, P.fn = fn, P.ctx = ctx;
    P.gen++;
    while (P.created < n) {
        pthread_t th;
        if (pthread_create(&th, nullptr, emu_pool_worker, (void *)(uintptr_t)P.created)) {
            fprintf(stderr, "emu_pool: pthread_create failed at thread %u\n", P.created);
            exit(2);
        }
        pthread_detach(th);
        P.created++;
    }
    pthread_cond_broadcast(&P.go);
    while (P.left) pthread_cond_wait(&P.done, &P.mu);
    pthread_mutex_unlock(&P.mu);
}
#endif
