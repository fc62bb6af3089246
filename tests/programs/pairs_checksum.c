/* Test program (issue 36): the blog's contending pairs with an output that never changes: threads
   2k and 2k+1 add to their pair's counter ROUNDS times each; each pair prints its total, which is
   2 x ROUNDS whatever the schedule, so that a run watched by pinwise can be compared with one
   that was not. The main thread is thread 0 and works as the others do.
   Usage: pairs_checksum [threads (even) [rounds]]. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

static struct { _Alignas(64) atomic_long total; } pairs[64];  /* a line each */
static long rounds = 20000000;

static void *work(void *arg)
{
    atomic_long *mine = &pairs[(long)arg / 2].total;
    for (long r = 0; r < rounds; r++)
        atomic_fetch_add_explicit(mine, 1, memory_order_relaxed);
    return NULL;
}

int main(int argc, char **argv)
{
    int threads = argc > 1 ? atoi(argv[1]) : 4;
    if (argc > 2)
        rounds = atol(argv[2]);
    if (threads < 2 || threads > 128 || threads % 2 || rounds < 1) {
        fprintf(stderr, "usage: pairs_checksum [threads (even, 2..128) [rounds]]\n");
        return 2;
    }
    pthread_t ids[128];
    for (long k = 1; k < threads; k++)
        if (pthread_create(&ids[k], NULL, work, (void *)k) != 0)
            return 1;
    work((void *)0L);
    for (int k = 1; k < threads; k++)
        pthread_join(ids[k], NULL);
    for (int p = 0; p < threads / 2; p++)
        printf("pair %d: %ld\n", p, atomic_load(&pairs[p].total));
    return 0;
}
