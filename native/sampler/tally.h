/* What pinwise-sample counts: per pair of threads, per time block, per hot line (tally.c). */
#ifndef PW_TALLY_H
#define PW_TALLY_H

#include <stdint.h>
#include <stdio.h>

/* A T x T matrix of counts or weights that grows with the threads. */
struct pw_pairs {
    double *count;
    int cap;
};
int pw_pairs_grow(struct pw_pairs *p, int threads);
static inline double *pw_pair(struct pw_pairs *p, int a, int b)
{
    return &p->count[(size_t)a * (size_t)p->cap + (size_t)b];
}

/* Hits per ordered pair of threads (sample's thread, trap's thread) in time blocks (the bootstrap's
 * units): at most max_blocks blocks;
 * when the run outgrows them, neighbouring blocks merge and a block lasts twice as long. */
struct pw_block {
    uint64_t *keys;           /* (a << 32 | b) + 1, 0 free */
    double *weight;           /* hits, each weighted by the inverse of its chance to be watched */
    size_t used, slots;
};
struct pw_blocks {
    struct pw_block *block;
    int count, max;
    uint64_t start_ns, length_ns;
};
int pw_blocks_init(struct pw_blocks *b, int max, uint64_t length_ns);
int pw_blocks_add(struct pw_blocks *b, uint64_t time_ns, int a, int c, double weight);
void pw_blocks_write(const struct pw_blocks *b, FILE *out);
void pw_blocks_free(struct pw_blocks *b);

/* Lines that carried events: per thread, the samples that read and wrote them (since their first
 * event), and per pair of threads their events. At most max lines are kept. */
struct pw_line {
    uint64_t line, address, read_ip, write_ip;
    double events;            /* weighted as the matrix */
    uint32_t *reads, *writes;   /* per thread, cap entries each */
    struct pw_pairs pairs;      /* only below 256 threads, as the Valgrind tool */
};
struct pw_lines {
    struct pw_line *entry;
    int32_t *index;             /* open addressing: line -> entry, -1 free */
    size_t used, slots, max;
    int cap;                    /* threads the per-thread arrays hold */
};
int pw_lines_init(struct pw_lines *l, size_t max);
struct pw_line *pw_lines_find(struct pw_lines *l, uint64_t line);
struct pw_line *pw_lines_add(struct pw_lines *l, uint64_t line, uint64_t address, int threads);
int pw_lines_grow(struct pw_lines *l, int threads);
void pw_lines_free(struct pw_lines *l);

#endif
