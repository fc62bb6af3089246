/* patterns: threads that communicate in the patterns of the papers, on demand.
 *
 *   patterns PATTERN [-n THREADS] [-i ITERATIONS] [-s SHARED_RATIO] [-m IMBALANCE] [-z KIB]
 *
 * The main thread is thread 0 and works like the others (as an OpenMP master does), so thread k
 * of the traced matrix and slot k of a pinwise plan are the same thread. Each thread, every
 * iteration, makes ACCESSES memory accesses: a share SHARED_RATIO of them are atomic increments on
 * the 64-byte lines it shares with its partners, the rest go to its own private lines. Partners:
 *   pairs       i with i^1                      (the blog's contending pairs)
 *   neighbour   i with i-1 and i+1              (NPB UA)
 *   far-pairs   i with i+T/2                    (NPB LU)
 *   master      0 with everyone                 (initialisation / reduction, Blackscholes)
 *   pipeline    i with i+1, and stage T/2 busy  (PARSEC ferret)
 *   all-to-all  everyone with everyone          (swaptions)
 *   private     nobody                          (NPB EP)
 *   swap        i with i^1, then, after a barrier half way, i with i^2: two phases (pinwise.phases)
 *   shift       i with i-1 and i+1, then, after a barrier half way, i with i+T/2: neighbours, then far pairs
 * IMBALANCE (default 0; pipeline 1) gives thread 0 (pipeline: the middle stage) that much more work.
 * KIB (default 4) is the size of each thread's private working set. With -H (hand pinning, for
 * comparison) each thread pins itself with sched_setaffinity, pairs and far-pairs partners on one
 * CPU: thread i to CPU (i / 2) mod ncpus (far-pairs: (i mod T/2) mod ncpus).
 * Prints "Time in seconds = T".
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>

#define ACCESSES 1000

struct line {
    _Alignas(64) atomic_long value;
    char pad[64 - sizeof(atomic_long)];
};

enum pattern { PAIRS, NEIGHBOUR, FAR_PAIRS, MASTER, PIPELINE, ALL_TO_ALL, PRIVATE, SWAP, SHIFT };
static const char *names[] = {"pairs", "neighbour", "far-pairs", "master", "pipeline", "all-to-all", "private", "swap",
                              "shift"};

static enum pattern pattern;
static int threads = 4;
static long iterations = 2000;
static double shared_ratio = 0.5;
static double imbalance = -1;
static long private_lines_count = 64;  /* 4 KiB */
static int hand = 0;
static struct line *channels;   /* channel (a, b), a < b: channels[a * threads + b] */
static pthread_barrier_t start, middle;

/* The partners of thread ``self`` in the first half of the iterations (``later`` 0) or the second. */
static int partners(int self, int later, int *out)
{
    int n = 0;
    switch (pattern) {
    case PAIRS:
        if ((self ^ 1) < threads) out[n++] = self ^ 1;
        break;
    case SWAP:
        if ((self ^ (later ? 2 : 1)) < threads) out[n++] = self ^ (later ? 2 : 1);
        break;
    case SHIFT:  /* neighbours, then far pairs */
        if (later) {
            if (threads >= 2) out[n++] = (self + threads / 2) % threads == self ? (self + 1) % threads : (self + threads / 2) % threads;
        } else {
            if (self > 0) out[n++] = self - 1;
            if (self + 1 < threads) out[n++] = self + 1;
        }
        break;
    case NEIGHBOUR:
    case PIPELINE:
        if (self > 0) out[n++] = self - 1;
        if (self + 1 < threads) out[n++] = self + 1;
        break;
    case FAR_PAIRS:
        if (threads >= 2) out[n++] = (self + threads / 2) % threads == self ? (self + 1) % threads : (self + threads / 2) % threads;
        break;
    case MASTER:
        if (self == 0)
            for (int k = 1; k < threads; k++) out[n++] = k;
        else
            out[n++] = 0;
        break;
    case ALL_TO_ALL:
        for (int k = 0; k < threads; k++)
            if (k != self) out[n++] = k;
        break;
    case PRIVATE:
        break;
    }
    return n;
}

static int busy_thread(void)
{
    return pattern == PIPELINE ? threads / 2 : 0;
}

static void pin_by_hand(int self)
{
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    int group = pattern == FAR_PAIRS ? self % (threads / 2 > 0 ? threads / 2 : 1) : self / 2;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET((int)(group % cpus), &set);
    sched_setaffinity(0, sizeof set, &set);
}

static void *work(void *arg)
{
    int self = (int)(long)arg;
    if (hand)
        pin_by_hand(self);
    int *mine = malloc(sizeof(int) * (size_t)threads);
    long lines = private_lines_count;
    struct line *private_lines = aligned_alloc(64, sizeof(struct line) * (size_t)lines);
    if (mine == NULL || private_lines == NULL)
        abort();
    memset(private_lines, 0, sizeof(struct line) * (size_t)lines);
    double factor = self == busy_thread() ? 1.0 + imbalance : 1.0;
    /* Everything the loop needs lives on this thread's stack or is its own: reading the globals
       in the loop would make every thread share their cache line, and show up as all-to-all. */
    atomic_long *targets[2][1024];
    int count[2];
    for (int later = 0; later < 2; later++) {
        count[later] = partners(self, later, mine);
        for (int k = 0; k < count[later]; k++) {
            int a = self < mine[k] ? self : mine[k], b = self < mine[k] ? mine[k] : self;
            targets[later][k] = &channels[a * threads + b].value;
            if (self == a)  /* first touch by an owner, not by the main thread: no false "master" sharing */
                atomic_store(targets[later][k], 0);
        }
    }
    int n = count[0];
    long shared = n ? (long)(ACCESSES * shared_ratio * factor) : 0;
    long private_accesses = (long)(ACCESSES * factor) - shared;
    long rounds = iterations, swap_at = pattern == SWAP || pattern == SHIFT ? iterations / 2 : -1;
    int phase = 0;
    pthread_barrier_wait(&start);
    for (long it = 0; it < rounds; it++) {
        if (it == swap_at) {  /* every thread at once: the phase changes at one moment */
            pthread_barrier_wait(&middle);
            phase = 1;
            n = count[1];
            shared = n ? (long)(ACCESSES * shared_ratio * factor) : 0;
            private_accesses = (long)(ACCESSES * factor) - shared;
        }
        for (long k = 0; k < shared; k++)
            atomic_fetch_add_explicit(targets[phase][k % n], 1, memory_order_relaxed);
        for (long k = 0; k < private_accesses; k++) {
            /* each iteration goes on where the last one stopped: the whole working set is used */
            struct line *line = &private_lines[(it * private_accesses + k) % lines];
            atomic_store_explicit(&line->value, atomic_load_explicit(&line->value, memory_order_relaxed) + 1,
                                  memory_order_relaxed);
        }
    }
    free(private_lines);
    free(mine);
    return NULL;
}

static void usage(void)
{
    fprintf(stderr, "usage: patterns {pairs|neighbour|far-pairs|master|pipeline|all-to-all|private|swap|shift} "
                    "[-n THREADS] [-i ITERATIONS] [-s SHARED_RATIO] [-m IMBALANCE] [-z KIB]\n"
                    "  -n THREADS     threads, the main thread included (default 4)\n"
                    "  -i ITERATIONS  iterations of 1000 accesses per thread\n"
                    "  -s RATIO       share of accesses to shared lines (default 0.5)\n"
                    "  -m IMBALANCE   extra work of the busiest thread (1 = twice as much)\n"
                    "  -z KIB         private working set per thread in KiB\n");
}

int main(int argc, char **argv)
{
    if (argc >= 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
        usage();
        return 0;
    }
    if (argc < 2) {
        usage();
        return 2;
    }
    int found = -1;
    for (int p = 0; p <= SHIFT; p++)
        if (strcmp(argv[1], names[p]) == 0)
            found = p;
    if (found < 0) {
        fprintf(stderr, "patterns: unknown pattern '%s'\n", argv[1]);
        usage();
        return 2;
    }
    pattern = (enum pattern)found;
    for (int i = 2; i < argc; i++) {
        char *end = NULL;
        if (!strcmp(argv[i], "-H")) {
            hand = 1;
            continue;
        }
        if (i + 1 >= argc) {
            usage();
            return 2;
        }
        if (!strcmp(argv[i], "-n"))
            threads = (int)strtol(argv[++i], &end, 10);
        else if (!strcmp(argv[i], "-i"))
            iterations = strtol(argv[++i], &end, 10);
        else if (!strcmp(argv[i], "-s"))
            shared_ratio = strtod(argv[++i], &end);
        else if (!strcmp(argv[i], "-m"))
            imbalance = strtod(argv[++i], &end);
        else if (!strcmp(argv[i], "-z"))
            private_lines_count = strtol(argv[++i], &end, 10) * 1024 / 64;
        else {
            usage();
            return 2;
        }
        if (end == NULL || *end != '\0') {
            fprintf(stderr, "patterns: '%s' is not a number\n", argv[i]);
            return 2;
        }
    }
    if (imbalance < 0)
        imbalance = pattern == PIPELINE ? 1.0 : 0.0;
    if (threads < 1 || threads > 1024 || iterations < 1 || shared_ratio < 0 || shared_ratio > 1 || imbalance > 100 ||
        private_lines_count < 1 || private_lines_count > (1L << 24)) {
        fprintf(stderr, "patterns: need 1 <= THREADS <= 1024, ITERATIONS >= 1, 0 <= SHARED_RATIO <= 1, IMBALANCE <= 100, "
                        "1 <= KIB <= 1048576\n");
        return 2;
    }
    channels = aligned_alloc(64, sizeof(struct line) * (size_t)threads * (size_t)threads);
    pthread_t *ids = malloc(sizeof(pthread_t) * (size_t)threads);
    if (channels == NULL || ids == NULL)
        return 1;
    pthread_barrier_init(&start, NULL, (unsigned)threads);
    pthread_barrier_init(&middle, NULL, (unsigned)threads);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int k = 1; k < threads; k++)
        pthread_create(&ids[k], NULL, work, (void *)(long)k);
    work((void *)0L);
    for (int k = 1; k < threads; k++)
        pthread_join(ids[k], NULL);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    printf("Time in seconds = %.6f\n", (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9);
    free(ids);
    free(channels);
    return 0;
}
