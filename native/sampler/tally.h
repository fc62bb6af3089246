/* What pinwise-sample counts: per pair of threads, per time block, per hot line (tally.c). */
#ifndef PW_TALLY_H
#define PW_TALLY_H

#include <stdint.h>
#include <stdio.h>

/* Counts or weights per ordered pair of threads, in an open-addressing table keyed (a << 32 | b) + 1
 * (0: a free slot): only the pairs counted take room, so a program that made 8,000 threads in
 * rounds of four holds a few tens of thousands of entries, not 64 million, and a walk over the
 * entries costs what they hold. */
struct pw_pairs {
    uint64_t *keys;
    double *count;
    size_t used, slots;
};
/* The pair's entry, a new one at 0 if it had none; NULL when the memory ran out. The pointer
 * holds until the next pw_pair or pw_pairs_add on the same table (a new entry may move them all). */
double *pw_pair(struct pw_pairs *p, int a, int b);
/* The pair's value, 0 if it has no entry (nothing is added). */
double pw_pair_get(const struct pw_pairs *p, int a, int b);
/* Adds ``value`` to the pair's entry; 0 when the memory ran out. */
int pw_pairs_add(struct pw_pairs *p, int a, int b, double value);
/* The threads of the entry in slot ``i`` (its key nonzero). */
static inline int pw_pair_first(const struct pw_pairs *p, size_t i) { return (int)((p->keys[i] - 1) >> 32); }
static inline int pw_pair_second(const struct pw_pairs *p, size_t i) { return (int)((p->keys[i] - 1) & 0xffffffffu); }
void pw_pairs_free(struct pw_pairs *p);

/* Hits per ordered pair of threads (sample's thread, trap's thread) in time blocks (the bootstrap's
 * units): at most max_blocks blocks;
 * when the run outgrows them, neighbouring blocks merge and a block lasts twice as long. */
struct pw_blocks {
    struct pw_pairs *block;   /* hits, each weighted by the inverse of its chance to be watched */
    int count, max;
    uint64_t start_ns, length_ns;
};
int pw_blocks_init(struct pw_blocks *b, int max, uint64_t length_ns);
int pw_blocks_add(struct pw_blocks *b, uint64_t time_ns, int a, int c, double weight);
/* origin_ns: the start of sampling, from which the first block's start is written */
void pw_blocks_write(const struct pw_blocks *b, FILE *out, uint64_t origin_ns);
void pw_blocks_free(struct pw_blocks *b);

/* Lines that carried events: per thread, the samples that read and wrote them (since their first
 * event), and per pair of threads their events. At most max lines are kept. */
struct pw_line {
    uint64_t line, address, read_ip, write_ip;
    double events;            /* weighted as the matrix */
    struct pw_pairs samples;    /* (thread, 0): the samples that read it, (thread, 1): that wrote it */
    struct pw_pairs pairs;      /* events per pair of threads (a < b) */
};
struct pw_lines {
    struct pw_line *entry;
    int32_t *index;             /* open addressing: line -> entry, -1 free */
    size_t used, slots, max;
};
int pw_lines_init(struct pw_lines *l, size_t max);
struct pw_line *pw_lines_find(struct pw_lines *l, uint64_t line);
struct pw_line *pw_lines_add(struct pw_lines *l, uint64_t line, uint64_t address);
void pw_lines_free(struct pw_lines *l);

#endif
