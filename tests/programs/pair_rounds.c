/* Test program (issue 37): the blog's contending pairs, made again in a second round after a pause,
   as a program that makes a thread per task does. Round r's threads 0 and 1 add to one counter,
   2 and 3 to another (each on a line of its own), for the round's seconds; the main thread joins
   them, sleeps GAP seconds with no other thread alive, and makes the next round. Each worker prints,
   when it ends, the CPUs it was allowed at its first instruction and half a second in:
       worker ROUND J start CPUS later CPUS
   (CPU lists as "0,1"), so a test reads where each thread of the second round started, whether
   that was its creator's doing, the preload library's or pinwise's from outside.
   Usage: pair_rounds FIRST_SECONDS GAP_SECONDS SECOND_SECONDS. */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static struct { _Alignas(64) atomic_long value; } counters[2];
static pthread_mutex_t printing = PTHREAD_MUTEX_INITIALIZER;
static double seconds[2];

struct worker {
    int round, j;
};

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void cpus(char *out, size_t len)
{
    cpu_set_t set;
    size_t used = 0;
    out[0] = '\0';
    if (sched_getaffinity(0, sizeof set, &set) != 0)
        return;
    for (int cpu = 0; cpu < CPU_SETSIZE && used + 8 < len; cpu++)
        if (CPU_ISSET(cpu, &set))
            used += (size_t)snprintf(out + used, len - used, used ? ",%d" : "%d", cpu);
}

static void *fight(void *arg)
{
    struct worker *me = arg;
    char start[512], later[512] = "-";
    cpus(start, sizeof start);
    double began = now(), end = began + seconds[me->round];
    atomic_long *counter = &counters[me->j / 2].value;
    int looked = 0;
    for (double t = began; t < end; t = now()) {
        for (int i = 0; i < 4096; i++)
            atomic_fetch_add_explicit(counter, 1, memory_order_relaxed);
        if (!looked && t - began >= 0.5) {
            cpus(later, sizeof later);
            looked = 1;
        }
    }
    pthread_mutex_lock(&printing);
    printf("worker %d %d start %s later %s\n", me->round + 1, me->j, start, later);
    fflush(stdout);
    pthread_mutex_unlock(&printing);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: %s FIRST_SECONDS GAP_SECONDS SECOND_SECONDS\n", argv[0]);
        return 2;
    }
    seconds[0] = atof(argv[1]);
    seconds[1] = atof(argv[3]);
    struct worker workers[2][4];
    for (int round = 0; round < 2; round++) {
        if (round == 1)
            usleep((useconds_t)(atof(argv[2]) * 1e6));
        pthread_t threads[4];
        for (int j = 0; j < 4; j++) {
            workers[round][j] = (struct worker){round, j};
            if (pthread_create(&threads[j], NULL, fight, &workers[round][j]) != 0)
                return 1;
        }
        for (int j = 0; j < 4; j++)
            pthread_join(threads[j], NULL);
    }
    return 0;
}
