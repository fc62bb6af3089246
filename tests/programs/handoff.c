/* Test program with a planted communication matrix: threads that run one after the other over
 * the same LINES cache lines, so every event can be counted by hand (tests/test_trace.py).
 *
 *   thread 0 (main) writes each line once;
 *   thread 1 reads each line ROUNDS times;
 *   thread 2 writes each line ROUNDS times;
 *   thread 3 reads ROUNDS times 8 bytes at offset 60 of lines 0 .. LINES-2: each read touches
 *            two lines (it crosses into the next one);
 *   thread 0 reads each line ROUNDS times;
 * and on two more lines of their own, A and B:
 *   thread 0 writes B once;
 *   thread 4 reads 8 bytes at offset 60 of A, once: it touches A and crosses into B;
 *   thread 0 reads B ROUNDS times (each an event with thread 4).
 *
 * Each thread starts after the previous one ended (pthread_join), so within one window an access
 * is an event with every thread that touched the line before it. Usage: handoff [LINES ROUNDS].
 */
#include <stdint.h>

#include "planted.h"

#define MAX_LINES 4096

static _Alignas(64) unsigned char lines[MAX_LINES * 64];
static _Alignas(64) unsigned char pair[128];  /* lines A and B */
static long line_count = 256, rounds = 100;

static void *read_each(void *arg)
{
    (void)arg;
    uint64_t sum = 0;
    for (long r = 0; r < rounds; r++)
        for (long k = 0; k < line_count; k++)
            sum += *(volatile uint64_t *)(lines + 64 * k);
    return (void *)(uintptr_t)sum;
}

static void *write_each(void *arg)
{
    (void)arg;
    for (long r = 0; r < rounds; r++)
        for (long k = 0; k < line_count; k++)
            *(volatile uint64_t *)(lines + 64 * k) = (uint64_t)r;
    return NULL;
}

static void *read_across(void *arg)
{
    (void)arg;
    uint64_t sum = 0;
    for (long r = 0; r < rounds; r++)
        for (long k = 0; k + 1 < line_count; k++)
            sum += *(volatile uint64_t *)(lines + 64 * k + 60);
    return (void *)(uintptr_t)sum;
}

static void *read_into_b(void *arg)
{
    (void)arg;
    return (void *)(uintptr_t)*(volatile uint64_t *)(pair + 60);
}

int main(int argc, char **argv)
{
    if (lines_and_rounds(argc, argv, "handoff", &line_count, 2, MAX_LINES, &rounds, 1))
        return 2;
    for (long k = 0; k < line_count; k++)
        *(volatile uint64_t *)(lines + 64 * k) = 1;
    run_alone(read_each);
    run_alone(write_each);
    run_alone(read_across);
    uint64_t sum = (uint64_t)(uintptr_t)read_each(NULL);
    *(volatile uint64_t *)(pair + 64) = 1;
    run_alone(read_into_b);
    for (long r = 0; r < rounds; r++)
        sum += *(volatile uint64_t *)(pair + 64);
    return sum == 0;
}
