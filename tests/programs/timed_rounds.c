/* Test program (issue 39): a benchmark harness in the manner of Google Benchmark running the
   blog's benchmark. The benchmark body creates four threads, two pairs fighting over an atomic
   counter each (threads 1 and 2 of a round over one, 3 and 4 over the other, each counter on a
   line of its own), and joins them. Like Google Benchmark the harness picks how many times to run
   the body by timing (each thread computes in registers between its increments, which Valgrind
   slows far more than the fight over the counter): it runs 1, then more iterations (ten times as many at most, aiming at the
   minimum time from the last run's speed) until one run of the loop lasts -t seconds. So the
   number of rounds, and of threads, depends on the machine's speed: under Valgrind it runs far
   fewer than natively, while each round is the same four threads.
   Usage: timed_rounds [-t seconds] [-i increments]. Prints the iterations of its last run. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static struct { _Alignas(64) atomic_long value; } pair_counter[2];
static long increments = 2000;

static void *fight(void *arg)
{
    atomic_long *counter = &pair_counter[(long)arg].value;
    unsigned long state = (unsigned long)arg;
    for (long i = 0; i < increments; i++) {
        for (int k = 0; k < 256; k++)  /* work in registers between increments, which Valgrind slows most */
            state = state * 6364136223846793005UL + 1442695040888963407UL;
        atomic_fetch_add_explicit(counter, 1 + (long)(state >> 63), memory_order_relaxed);
    }
    return NULL;
}

/* The benchmark body: threads 1, 2 on counter 0, threads 3, 4 on counter 1. */
static void body(void)
{
    pthread_t ids[4];
    for (long k = 0; k < 4; k++)
        if (pthread_create(&ids[k], NULL, fight, (void *)(k / 2)) != 0)
            exit(1);
    for (int k = 0; k < 4; k++)
        pthread_join(ids[k], NULL);
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    double min_time = 0.2;
    int option;
    while ((option = getopt(argc, argv, "t:i:")) != -1) {
        if (option == 't') min_time = atof(optarg);
        else if (option == 'i') increments = atol(optarg);
        else return 2;
    }
    if (min_time <= 0 || increments < 1) {
        fprintf(stderr, "usage: timed_rounds [-t seconds] [-i increments]\n");
        return 2;
    }
    long iterations = 1;
    for (;;) {
        double start = now();
        for (long i = 0; i < iterations; i++)
            body();
        double took = now() - start;
        if (took >= min_time)
            break;
        double factor = took > 0 ? 1.4 * min_time / took : 10;  /* Google Benchmark's aim */
        long next = (long)(iterations * (factor < 10 ? factor : 10));
        iterations = next > iterations ? next : iterations + 1;
    }
    printf("iterations %ld\ncounters %ld %ld\n", iterations, (long)pair_counter[0].value,
           (long)pair_counter[1].value);
    return 0;
}
