/* Benchmark program: a creator and two contending pairs, as a user would write them.
 *
 * The main thread creates four workers and joins them; it does nothing else. Workers 0 and 1
 * (created first) hammer one atomic counter, workers 2 and 3 another, each counter on a cache
 * line of its own, INCREMENTS times each. With -r ROUNDS it does so ROUNDS times, four new
 * workers each round, as a program that makes a thread per task does. With --hand each worker
 * pins itself first (pthread_setaffinity_np), pair k on CPU k mod the CPUs it may use, as the
 * thread-affinity blog does by hand; the main thread is left where the OS puts it. Prints "Time
 * in seconds = T" from the first creation to the last join.
 *
 *   creator_pairs [-i INCREMENTS] [-r ROUNDS] [--hand]
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct counter {
    _Alignas(64) atomic_long value;
    char pad[64 - sizeof(atomic_long)];
};

static struct counter counters[2];
static long increments = 2000000;
static int hand, rounds = 1;
static int cpus[CPU_SETSIZE], ncpus;

static void *worker(void *arg)
{
    long index = (long)arg;
    int pair = (int)(index / 2);
    if (hand) {
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(cpus[pair % ncpus], &one);
        pthread_setaffinity_np(pthread_self(), sizeof one, &one);
    }
    for (long i = 0; i < increments; i++)
        atomic_fetch_add(&counters[pair].value, 1);
    return NULL;
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-i") && i + 1 < argc)
            increments = atol(argv[++i]);
        else if (!strcmp(argv[i], "-r") && i + 1 < argc && atoi(argv[i + 1]) > 0)
            rounds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--hand"))
            hand = 1;
        else {
            fprintf(stderr, "usage: %s [-i INCREMENTS] [-r ROUNDS] [--hand]\n", argv[0]);
            return 2;
        }
    }
    cpu_set_t allowed;
    sched_getaffinity(0, sizeof allowed, &allowed);
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &allowed))
            cpus[ncpus++] = c;
    pthread_t threads[4];
    struct timespec start, end;
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (int round = 0; round < rounds; round++) {
        for (long t = 0; t < 4; t++)
            pthread_create(&threads[t], NULL, worker, (void *)t);
        for (int t = 0; t < 4; t++)
            pthread_join(threads[t], NULL);
    }
    clock_gettime(CLOCK_MONOTONIC, &end);
    printf("Time in seconds = %.6f\n", (double)(end.tv_sec - start.tv_sec) + (double)(end.tv_nsec - start.tv_nsec) * 1e-9);
    return counters[0].value == 2L * rounds * increments && counters[1].value == 2L * rounds * increments ? 0 : 1;
}
