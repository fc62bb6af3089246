/* Test program (issue 37): the blog's contending pairs in two phases whose pairs swap partners
   half way. Threads i and i^1 add to their pair's counter in phase 1; after a barrier, threads i
   and i^2 in phase 2. The main thread is thread 0 and works as the others do. With -H each thread
   pins itself beside its partner (pair p on CPU p mod ncpus) and pins itself again when the phase
   changes: the oracle an adaptive placement is measured against. Prints to stderr when phase 2
   began (CLOCK_MONOTONIC ns) and how long phase 1 took, and "Time in seconds = T" with the sum
   of the counters (always threads x rounds, whatever the schedule). With -A each thread starts
   on a CPU away from its phase-1 partner (thread i on the i-th allowed CPU, modulo their number)
   and at once gives its affinity back as it was: where the OS would otherwise start them is
   chance, and partners it happened to start together would leave an adaptive placement nothing
   to do in phase 1.
   Usage: phase_pairs [-H | -A] [threads (a multiple of 4) [rounds per phase]]. */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static struct { _Alignas(64) atomic_long value; } counters[2][64];  /* [phase][pair], a line each */
static int threads = 4, hand, apart;
static cpu_set_t given;  /* the affinity the program was started with */
static long rounds = 20000000;
static pthread_barrier_t middle;
static long start;  /* CLOCK_MONOTONIC ns when main began */

static long now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000L + t.tv_nsec;
}

static void pin_beside_partner(int pair)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(pair % (int)sysconf(_SC_NPROCESSORS_ONLN), &set);
    sched_setaffinity(0, sizeof set, &set);
}

/* -A: run a moment on the me-th allowed CPU (so the OS keeps the thread there), then take back
   every CPU it was given */
static void start_apart(int me)
{
    int allowed = CPU_COUNT(&given), seen = 0;
    for (int cpu = 0; cpu < CPU_SETSIZE; cpu++)
        if (CPU_ISSET(cpu, &given) && seen++ == me % allowed) {
            cpu_set_t one;
            CPU_ZERO(&one);
            CPU_SET(cpu, &one);
            sched_setaffinity(0, sizeof one, &one);
            break;
        }
    sched_setaffinity(0, sizeof given, &given);
}

static void *work(void *arg)
{
    int me = (int)(long)arg;
    if (apart)
        start_apart(me);
    for (int phase = 0; phase < 2; phase++) {
        /* phase 1: pairs {i, i^1}, numbered i/2; phase 2: pairs {i, i^2}, numbered by (i/4, i&1) */
        int pair = phase == 0 ? me / 2 : (me / 4) * 2 + (me & 1);
        if (hand)
            pin_beside_partner(pair);
        atomic_long *mine = &counters[phase][pair].value;
        for (long r = 0; r < rounds; r++)
            atomic_fetch_add_explicit(mine, 1, memory_order_relaxed);
        if (phase == 0 && pthread_barrier_wait(&middle) == PTHREAD_BARRIER_SERIAL_THREAD)
{
            long now = now_ns();
            fprintf(stderr, "phase 2 began at %ld ns (phase 1 took %.3f s)\n", now, (double)(now - start) * 1e-9);
        }
    }
    return NULL;
}

int main(int argc, char **argv)
{
    int at = 1;
    if (at < argc && strcmp(argv[at], "-H") == 0) {
        hand = 1;
        at++;
    } else if (at < argc && strcmp(argv[at], "-A") == 0) {
        apart = 1;
        at++;
    }
    if (at < argc)
        threads = atoi(argv[at++]);
    if (at < argc)
        rounds = atol(argv[at++]);
    if (threads < 4 || threads > 64 || threads % 4 || rounds < 1 || at != argc) {
        fprintf(stderr, "usage: phase_pairs [-H | -A] [threads (4, 8, ... 64) [rounds per phase]]\n");
        return 2;
    }
    if (sched_getaffinity(0, sizeof given, &given) != 0)
        return 1;
    pthread_barrier_init(&middle, NULL, (unsigned)threads);
    start = now_ns();
    pthread_t ids[64];
    for (long k = 1; k < threads; k++)
        if (pthread_create(&ids[k], NULL, work, (void *)k) != 0)
            return 1;
    work((void *)0L);
    long total = 0;
    for (int k = 1; k < threads; k++)
        pthread_join(ids[k], NULL);
    for (int phase = 0; phase < 2; phase++)
        for (int p = 0; p < threads / 2; p++)
            total += atomic_load(&counters[phase][p].value);
    printf("Time in seconds = %.6f (sum %ld)\n", (double)(now_ns() - start) * 1e-9, total);
    return 0;
}
