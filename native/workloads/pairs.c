/* pairs: the contending pairs of the thread-affinity blog (seeds/thread-affinity-pthreads-blog.md).
 *
 * P pairs of threads; the two threads of pair i increment one atomic counter on a cache line of
 * its own, N times each. Threads are created in pair order (pair 0's two threads, then pair 1's,
 * ...), after the main thread, so "pinwise run" slot k holds created thread k. With --hand the
 * program pins its threads itself with pthread_setaffinity_np, as the blog does by hand:
 * "together" puts pair i on CPU i mod ncpus, "apart" puts thread j on CPU j mod ncpus.
 * Prints "Time in seconds = T" (NPB style) for all repetitions together.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct counter {
    _Alignas(64) atomic_int value;
    char pad[64 - sizeof(atomic_int)];
};

static long increments = 100000;

static void *hammer(void *arg)
{
    atomic_int *value = arg;
    for (long i = 0; i < increments; i++)
        atomic_fetch_add(value, 1);
    return NULL;
}

static void usage(const char *name)
{
    fprintf(stderr, "usage: %s [-p PAIRS] [-i INCREMENTS] [-r REPETITIONS] [--hand together|apart]\n", name);
}

int main(int argc, char **argv)
{
    int pairs = 2, reps = 1, hand = 0; /* 1 together, 2 apart */
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-p") && i + 1 < argc)
            pairs = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-i") && i + 1 < argc)
            increments = atol(argv[++i]);
        else if (!strcmp(argv[i], "-r") && i + 1 < argc)
            reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--hand") && i + 1 < argc) {
            i++;
            hand = !strcmp(argv[i], "together") ? 1 : !strcmp(argv[i], "apart") ? 2 : -1;
        } else {
            usage(argv[0]);
            return 2;
        }
    }
    if (pairs < 1 || pairs > 512 || increments < 1 || reps < 1 || hand < 0) {
        usage(argv[0]);
        return 2;
    }
    long ncpus = sysconf(_SC_NPROCESSORS_ONLN);
    struct counter *counters = aligned_alloc(64, sizeof(struct counter) * (size_t)pairs);
    pthread_t *threads = malloc(sizeof(pthread_t) * 2 * (size_t)pairs);
    if (counters == NULL || threads == NULL)
        return 1;
    struct timespec start, end;
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (int rep = 0; rep < reps; rep++) {
        for (int p = 0; p < pairs; p++)
            atomic_store(&counters[p].value, 0);
        for (int t = 0; t < 2 * pairs; t++) {
            pthread_create(&threads[t], NULL, hammer, &counters[t / 2].value);
            if (hand) {
                cpu_set_t set;
                CPU_ZERO(&set);
                CPU_SET((int)((hand == 1 ? t / 2 : t) % ncpus), &set);
                pthread_setaffinity_np(threads[t], sizeof set, &set);
            }
        }
        for (int t = 0; t < 2 * pairs; t++)
            pthread_join(threads[t], NULL);
        for (int p = 0; p < pairs; p++)
            if (atomic_load(&counters[p].value) != 2 * increments) {
                fprintf(stderr, "pairs: lost increments\n");
                return 1;
            }
    }
    clock_gettime(CLOCK_MONOTONIC, &end);
    printf("Time in seconds = %.6f\n", (double)(end.tv_sec - start.tv_sec) + (double)(end.tv_nsec - start.tv_nsec) * 1e-9);
    free(counters);
    free(threads);
    return 0;
}
