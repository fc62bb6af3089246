/* Workload program (pinwise-rounds): the main thread creates WORKERS threads, joins them, ROUNDS
 * times. The workers of a round meet at a barrier, so they are all alive together whatever the
 * scheduler does, and the joins end every round before the next starts: rounds that any trace
 * must show. Worker j of a round shares a counter with worker j ^ 1 (pairs).
 * Usage: pinwise-rounds [WORKERS ROUNDS INCREMENTS]. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

struct counter {
    _Alignas(64) atomic_long value;
    char pad[64 - sizeof(atomic_long)];
};

static pthread_barrier_t together;
static struct counter *counters;
static long increments = 20000;

static void *worker(void *arg)
{
    long j = (long)arg, n = increments; /* a local copy: re-reading the global in the loop would be
                                             sharing between every pair of workers */
    atomic_long *mine = &counters[j / 2].value;
    pthread_barrier_wait(&together);
    for (long i = 0; i < n; i++)
        atomic_fetch_add(mine, 1);
    pthread_barrier_wait(&together);
    return NULL;
}

int main(int argc, char **argv)
{
    int workers = argc > 1 ? atoi(argv[1]) : 4, rounds = argc > 2 ? atoi(argv[2]) : 3;
    increments = argc > 3 ? atol(argv[3]) : increments;
    if (workers < 1 || workers > 256 || rounds < 1)
        return 2;
    counters = aligned_alloc(64, sizeof(struct counter) * (size_t)(workers / 2 + 1));
    pthread_t *threads = malloc(sizeof(pthread_t) * (size_t)workers);
    if (counters == NULL || threads == NULL)
        return 1;
    pthread_barrier_init(&together, NULL, (unsigned)workers);
    for (int r = 0; r < rounds; r++) {
        for (long j = 0; j < workers; j++)
            pthread_create(&threads[j], NULL, worker, (void *)j);
        for (int j = 0; j < workers; j++)
            pthread_join(threads[j], NULL);
    }
    printf("%d rounds of %d workers\n", rounds, workers);
    free(threads);
    free(counters);
    return 0;
}
