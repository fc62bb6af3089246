/* Test program (issue 39): the pipelined sweeps of an LU solver (NPB LU's SSOR), synchronised
   by spinning on an array of flags, one 64-byte line per thread. In the forward sweep thread k
   waits until thread k-1 has finished plane p (flag[k-1] > p), reads the edge (8 lines) thread
   k-1 wrote for that plane, works on its own rows and publishes its own edge and flag; the backward sweep
   runs the other way (k waits on k+1). So the data go between neighbours only (k and k+1), while
   under Valgrind, which runs one thread at a time, every waiting thread spins on the flag array
   through whole time slices: the flags carry nearly all the events, spread over T lines.
   Each thread counts its reads of the flags (in a register) and the program prints the total.
   With -r READS the sweeps go on (whole steps, at least -s of them) until the threads have read
   the flags READS times in all.
   Usage: spin_flags [-n threads] [-s steps] [-p planes] [-w work] [-r reads]. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define MAX_THREADS 64

static struct { _Alignas(64) atomic_long value; } flag[MAX_THREADS];
#define EDGE 64  /* doubles: the 8 lines of a thread's edge */
static struct { _Alignas(64) double value[EDGE]; } edge[MAX_THREADS];
static struct { _Alignas(64) unsigned long long value; } flag_reads[MAX_THREADS];
static int threads = 6, steps = 4, planes = 64, work = 256;
static unsigned long long wanted_reads = 0;
static double *rows[MAX_THREADS];
static pthread_barrier_t step_end;
static int more;  /* thread 0's word between the two barriers of a step's end */

/* Wait until thread k has done `at` planes, counting the reads. */
static unsigned long long wait_for(int k, long at)
{
    unsigned long long reads = 1;
    while (atomic_load_explicit(&flag[k].value, memory_order_acquire) < at) {
        /* 65 reads a turn: Valgrind runs a turn as one block, so the reads come cheaper */
        long seen = 0;
        for (int i = 0; i < 64; i++)
            seen |= atomic_load_explicit(&flag[k].value, memory_order_relaxed);
        reads += 65;
        __asm__ volatile("" : : "r"(seen));
    }
    return reads;
}

static void plane(int me, int from, long at, unsigned long long *reads)
{
    double carried = 0;
    if (from >= 0) {
        *reads += wait_for(from, at + 1);
        for (int i = 0; i < EDGE; i++)
            carried += edge[from].value[i];
    }
    double *mine = rows[me];
    for (int i = 0; i < work; i++)
        mine[i] = 0.5 * mine[i] + 1e-3 * carried / EDGE + 1e-3 * i;
    for (int i = 0; i < EDGE; i++)  /* the reader may be a plane behind: a checksum, no answer */
        edge[me].value[i] = mine[(i * 7) % work];
    atomic_store_explicit(&flag[me].value, at + 1, memory_order_release);
}

static void *sweep(void *arg)
{
    int me = (int)(long)arg;
    unsigned long long reads = 0;
    rows[me] = calloc((size_t)work, sizeof(double));
    long at = 0;
    for (int s = 0;; s++) {
        for (int p = 0; p < planes; p++, at++)  /* forward: from the left neighbour */
            plane(me, me > 0 ? me - 1 : -1, at, &reads);
        for (int p = 0; p < planes; p++, at++)  /* backward: from the right neighbour */
            plane(me, me + 1 < threads ? me + 1 : -1, at, &reads);
        flag_reads[me].value = reads;
        pthread_barrier_wait(&step_end);
        if (me == 0) {
            unsigned long long total = 0;
            for (int k = 0; k < threads; k++)
                total += flag_reads[k].value;
            more = s + 1 < steps || total < wanted_reads;
        }
        pthread_barrier_wait(&step_end);
        if (!more)
            break;
    }
    return NULL;
}

int main(int argc, char **argv)
{
    int option;
    while ((option = getopt(argc, argv, "n:s:p:w:r:")) != -1) {
        switch (option) {
        case 'n': threads = atoi(optarg); break;
        case 's': steps = atoi(optarg); break;
        case 'p': planes = atoi(optarg); break;
        case 'w': work = atoi(optarg); break;
        case 'r': wanted_reads = strtoull(optarg, NULL, 10); break;
        default: threads = 0;
        }
    }
    if (threads < 2 || threads > MAX_THREADS || steps < 1 || planes < 1 || work < 1) {
        fprintf(stderr, "usage: spin_flags [-n threads 2-%d] [-s steps] [-p planes] [-w work] [-r reads]\n",
                MAX_THREADS);
        return 2;
    }
    pthread_barrier_init(&step_end, NULL, (unsigned)threads);
    pthread_t ids[MAX_THREADS];
    for (int k = 1; k < threads; k++)
        if (pthread_create(&ids[k], NULL, sweep, (void *)(long)k) != 0)
            return 1;
    sweep((void *)0L);
    unsigned long long total = flag_reads[0].value;
    double sum = rows[0][work - 1];
    for (int k = 1; k < threads; k++) {
        pthread_join(ids[k], NULL);
        total += flag_reads[k].value;
        sum += rows[k][work - 1];
    }
    printf("flag reads %llu\nsum %.6f\n", total, sum);
    return 0;
}
