/* pinwise-sample's counters: growing pair matrices, time blocks of hits, hot lines. Each structure
 * is bounded: blocks merge when the run outgrows them, lines stop being added at their maximum. */
#include "tally.h"

#include <stdlib.h>
#include <string.h>

static uint64_t mix(uint64_t key)
{
    return key * 0x9E3779B97F4A7C15ULL;  /* Fibonacci hashing; the caller takes the top bits */
}

/* A capacity for at least ``threads``: the current one doubled as often as needed (16 at first). */
static int capacity_for(int current, int threads)
{
    int cap = current ? current : 16;
    while (cap < threads)
        cap *= 2;
    return cap;
}

int pw_pairs_grow(struct pw_pairs *p, int threads)
{
    if (threads <= p->cap)
        return 1;
    int cap = capacity_for(p->cap, threads);
    double *grown = calloc((size_t)cap * (size_t)cap, sizeof *grown);
    if (grown == NULL)
        return 0;
    for (int a = 0; a < p->cap; a++)
        memcpy(&grown[(size_t)a * (size_t)cap], &p->count[(size_t)a * (size_t)p->cap], sizeof *grown * (size_t)p->cap);
    free(p->count);
    p->count = grown;
    p->cap = cap;
    return 1;
}

/* -- time blocks ------------------------------------------------------------------------------ */

static int block_put(struct pw_block *k, uint64_t key, double weight)
{
    if ((k->used + 1) * 2 > k->slots) {
        size_t slots = k->slots ? k->slots * 2 : 64;
        uint64_t *keys = calloc(slots, sizeof *keys);
        double *counts = calloc(slots, sizeof *counts);
        if (keys == NULL || counts == NULL) {
            free(keys);
            free(counts);
            return 0;
        }
        struct pw_block bigger = {keys, counts, 0, slots};
        for (size_t i = 0; i < k->slots; i++)
            if (k->keys[i])
                block_put(&bigger, k->keys[i], k->weight[i]);
        free(k->keys);
        free(k->weight);
        *k = bigger;
    }
    size_t mask = k->slots - 1, i = (size_t)(mix(key) >> 40) & mask;
    while (k->keys[i] && k->keys[i] != key)
        i = (i + 1) & mask;
    if (!k->keys[i]) {
        k->keys[i] = key;
        k->used++;
    }
    k->weight[i] += weight;
    return 1;
}

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
            struct pw_block merged = {0};
            for (int k = 2 * i; k < 2 * i + 2 && k < b->count; k++) {
                for (size_t s = 0; s < b->block[k].slots; s++)
                    if (b->block[k].keys[s] && !block_put(&merged, b->block[k].keys[s], b->block[k].weight[s]))
                        return 0;
                free(b->block[k].keys);
                free(b->block[k].weight);
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
    return block_put(&b->block[at], ((uint64_t)a << 32 | (uint64_t)c) + 1, weight);
}

void pw_blocks_write(const struct pw_blocks *b, FILE *out)
{
    fprintf(out, "blocks %d %llu\n", b->count, (unsigned long long)b->length_ns);
    for (int i = 0; i < b->count; i++) {
        fprintf(out, "block");
        for (size_t s = 0; s < b->block[i].slots; s++)
            if (b->block[i].keys[s]) {
                uint64_t key = b->block[i].keys[s] - 1;
                fprintf(out, " %u %u %.6g", (unsigned)(key >> 32), (unsigned)(key & 0xffffffffu), b->block[i].weight[s]);
            }
        fprintf(out, "\n");
    }
}

void pw_blocks_free(struct pw_blocks *b)
{
    for (int i = 0; i < b->max; i++) {
        free(b->block[i].keys);
        free(b->block[i].weight);
    }
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

static int line_arrays(struct pw_line *e, int old_cap, int cap)
{
    uint32_t *reads = calloc((size_t)cap, sizeof *reads), *writes = calloc((size_t)cap, sizeof *writes);
    if (reads == NULL || writes == NULL) {
        free(reads);
        free(writes);
        return 0;
    }
    if (e->reads) {
        memcpy(reads, e->reads, sizeof *reads * (size_t)old_cap);
        memcpy(writes, e->writes, sizeof *writes * (size_t)old_cap);
    }
    free(e->reads);
    free(e->writes);
    e->reads = reads;
    e->writes = writes;
    return cap > 256 || pw_pairs_grow(&e->pairs, cap);
}

int pw_lines_grow(struct pw_lines *l, int threads)
{
    if (threads <= l->cap)
        return 1;
    int cap = capacity_for(l->cap, threads);
    for (size_t i = 0; i < l->used; i++)
        if (!line_arrays(&l->entry[i], l->cap, cap))
            return 0;
    l->cap = cap;
    return 1;
}

struct pw_line *pw_lines_add(struct pw_lines *l, uint64_t line, uint64_t address, int threads)
{
    if (l->used >= l->max || !pw_lines_grow(l, threads))
        return NULL;
    struct pw_line *e = &l->entry[l->used];
    memset(e, 0, sizeof *e);
    if (!line_arrays(e, 0, l->cap ? l->cap : 16))
        return NULL;
    if (!l->cap)
        l->cap = 16;
    e->line = line;
    e->address = address;
    l->index[line_slot(l, line)] = (int32_t)l->used;
    l->used++;
    return e;
}

void pw_lines_free(struct pw_lines *l)
{
    for (size_t i = 0; i < l->used; i++) {
        free(l->entry[i].reads);
        free(l->entry[i].writes);
        free(l->entry[i].pairs.count);
    }
    free(l->entry);
    free(l->index);
    memset(l, 0, sizeof *l);
}
