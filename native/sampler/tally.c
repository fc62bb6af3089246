/* pinwise-sample's counters: per pair of threads (a hash table of the pairs counted), per time block,
 * per hot line. Blocks merge when the run outgrows them; lines stop being added at their maximum;
 * the pairs grow with the pairs that have counts, not with the square of the threads. */
#include "tally.h"

#include <stdlib.h>
#include <string.h>

static uint64_t mix(uint64_t key)
{
    return key * 0x9E3779B97F4A7C15ULL;  /* Fibonacci hashing; the caller takes the top bits */
}

/* -- pairs ----------------------------------------------------------------------------------- */

static uint64_t pair_key(int a, int b)
{
    return ((uint64_t)(uint32_t)a << 32 | (uint64_t)(uint32_t)b) + 1;
}

static size_t pair_slot(const struct pw_pairs *p, uint64_t key)
{
    size_t mask = p->slots - 1, i = (size_t)(mix(key) >> 32) & mask;  /* up to 2^32 slots */
    while (p->keys[i] && p->keys[i] != key)
        i = (i + 1) & mask;
    return i;
}

/* Twice the slots (64 at first), every entry placed anew; 0 when the memory ran out. */
static int pairs_grow(struct pw_pairs *p)
{
    size_t slots = p->slots ? p->slots * 2 : 64;
    struct pw_pairs bigger = {calloc(slots, sizeof *bigger.keys), calloc(slots, sizeof *bigger.count), 0, slots};
    if (bigger.keys == NULL || bigger.count == NULL) {
        free(bigger.keys);
        free(bigger.count);
        return 0;
    }
    for (size_t i = 0; i < p->slots; i++)
        if (p->keys[i]) {
            size_t at = pair_slot(&bigger, p->keys[i]);
            bigger.keys[at] = p->keys[i];
            bigger.count[at] = p->count[i];
            bigger.used++;
        }
    free(p->keys);
    free(p->count);
    *p = bigger;
    return 1;
}

double *pw_pair(struct pw_pairs *p, int a, int b)
{
    uint64_t key = pair_key(a, b);
    if (p->slots) {
        size_t at = pair_slot(p, key);
        if (p->keys[at])
            return &p->count[at];
    }
    if ((p->used + 1) * 2 > p->slots && !pairs_grow(p))  /* at most half full: short probes */
        return NULL;
    size_t at = pair_slot(p, key);
    p->keys[at] = key;
    p->used++;
    return &p->count[at];
}

double pw_pair_get(const struct pw_pairs *p, int a, int b)
{
    if (!p->slots)
        return 0.0;
    size_t at = pair_slot(p, pair_key(a, b));
    return p->keys[at] ? p->count[at] : 0.0;
}

int pw_pairs_add(struct pw_pairs *p, int a, int b, double value)
{
    double *entry = pw_pair(p, a, b);
    if (entry == NULL)
        return 0;
    *entry += value;
    return 1;
}

void pw_pairs_free(struct pw_pairs *p)
{
    free(p->keys);
    free(p->count);
    memset(p, 0, sizeof *p);
}

/* -- time blocks ------------------------------------------------------------------------------ */

int pw_blocks_init(struct pw_blocks *b, int max, uint64_t length_ns)
{
    memset(b, 0, sizeof *b);
    b->block = calloc((size_t)max, sizeof *b->block);
    b->max = max;
    b->length_ns = length_ns;
    return b->block != NULL;
}

int pw_blocks_add(struct pw_blocks *b, uint64_t time_ns, int a, int c, double weight)
{
    if (b->count == 0)
        b->start_ns = time_ns;
    uint64_t at = time_ns > b->start_ns ? (time_ns - b->start_ns) / b->length_ns : 0;
    while (at >= (uint64_t)b->max) {  /* merge neighbours: half as many blocks, each twice as long */
        for (int i = 0; i < b->max / 2; i++) {
            struct pw_pairs merged = {0};
            for (int k = 2 * i; k < 2 * i + 2 && k < b->count; k++) {
                struct pw_pairs *from = &b->block[k];
                for (size_t s = 0; s < from->slots; s++)
                    if (from->keys[s] && !pw_pairs_add(&merged, pw_pair_first(from, s), pw_pair_second(from, s),
                                                       from->count[s]))
                        return 0;
                pw_pairs_free(from);
            }
            b->block[i] = merged;
        }
        for (int i = b->max / 2; i < b->max; i++)
            memset(&b->block[i], 0, sizeof b->block[i]);
        b->count = (b->count + 1) / 2;
        b->length_ns *= 2;
        at = (time_ns - b->start_ns) / b->length_ns;
    }
    if ((int)at >= b->count)
        b->count = (int)at + 1;
    return pw_pairs_add(&b->block[at], a, c, weight);
}

void pw_blocks_write(const struct pw_blocks *b, FILE *out, uint64_t origin_ns)
{
    uint64_t first = b->count && b->start_ns > origin_ns ? b->start_ns - origin_ns : 0;
    fprintf(out, "blocks %d %llu %llu\n", b->count, (unsigned long long)b->length_ns, (unsigned long long)first);
    for (int i = 0; i < b->count; i++) {
        const struct pw_pairs *block = &b->block[i];
        fprintf(out, "block");
        for (size_t s = 0; s < block->slots; s++)
            if (block->keys[s])
                fprintf(out, " %d %d %.6g", pw_pair_first(block, s), pw_pair_second(block, s), block->count[s]);
        fprintf(out, "\n");
    }
}

void pw_blocks_free(struct pw_blocks *b)
{
    for (int i = 0; i < b->max; i++)
        pw_pairs_free(&b->block[i]);
    free(b->block);
    memset(b, 0, sizeof *b);
}

/* -- hot lines ------------------------------------------------------------------------------- */

int pw_lines_init(struct pw_lines *l, size_t max)
{
    memset(l, 0, sizeof *l);
    l->max = max;
    l->slots = 1;
    while (l->slots < 2 * max)
        l->slots *= 2;
    l->entry = calloc(max, sizeof *l->entry);
    l->index = malloc(l->slots * sizeof *l->index);
    if (l->entry == NULL || l->index == NULL)
        return 0;
    memset(l->index, 0xff, l->slots * sizeof *l->index);
    return 1;
}

static size_t line_slot(const struct pw_lines *l, uint64_t line)
{
    size_t mask = l->slots - 1, i = (size_t)(mix(line) >> 40) & mask;
    while (l->index[i] >= 0 && l->entry[l->index[i]].line != line)
        i = (i + 1) & mask;
    return i;
}

struct pw_line *pw_lines_find(struct pw_lines *l, uint64_t line)
{
    int32_t at = l->index[line_slot(l, line)];
    return at >= 0 ? &l->entry[at] : NULL;
}

struct pw_line *pw_lines_add(struct pw_lines *l, uint64_t line, uint64_t address)
{
    if (l->used >= l->max)
        return NULL;
    struct pw_line *e = &l->entry[l->used];
    memset(e, 0, sizeof *e);
    e->line = line;
    e->address = address;
    l->index[line_slot(l, line)] = (int32_t)l->used;
    l->used++;
    return e;
}

void pw_lines_free(struct pw_lines *l)
{
    for (size_t i = 0; i < l->used; i++) {
        pw_pairs_free(&l->entry[i].samples);
        pw_pairs_free(&l->entry[i].pairs);
    }
    free(l->entry);
    free(l->index);
    memset(l, 0, sizeof *l);
}
