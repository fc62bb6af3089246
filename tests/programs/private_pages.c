/* Test program with planted events on memory the tracer watches by page (its page mode, for
 * lookups that stream through private memory):
 *
 *   thread 1, alone, sweeps LINES lines of its own, writing the even ones and reading the odd
 *            ones: more than 16384 first accesses in one window for each of the two instructions,
 *            after which the tracer watches their pages instead of their lines;
 *   the window ends (the tool's client request; the tests run it with windows too long to end on
 *            their own), which also lets the tracer translate the two instructions anew;
 *   thread 1 sweeps the lines ROUNDS more times, now through page slots only;
 *   thread 2, after thread 1 ended, reads lines 0, 1, 4, 5, 8, 9, ... once each.
 *
 * Thread 2's reads are in the window of thread 1's second sweeps, so each is an event with thread 1
 * (sharing any: LINES / 2 events), or, counting only pairs with a write (sharing write), one for
 * each of those lines thread 1 wrote (LINES / 4). Those events exist only if the lines' records
 * learn, when thread 2 first touches a page, what thread 1's page slots saw.
 * Usage: private_pages [LINES ROUNDS].
 */
#include <stdint.h>

#include "planted.h"
#include <valgrind/valgrind.h>

#define MAX_LINES 262144

static _Alignas(4096) unsigned char lines[MAX_LINES * 64];
static long line_count = 40000, rounds = 3;

static volatile uint64_t *line(long k)
{
    return (volatile uint64_t *)(lines + 64 * k);
}

/* One sweep: the same two instructions (a store, a load) each time it is called. */
static __attribute__((noinline)) uint64_t sweep(uint64_t sum)
{
    for (long k = 0; k < line_count; k += 2) {
        *line(k) = (uint64_t)k + sum;
        sum += *line(k + 1);
    }
    return sum;
}

static void *owner(void *arg)
{
    (void)arg;
    uint64_t sum = sweep(0);
    VALGRIND_DO_CLIENT_REQUEST_STMT(VG_USERREQ_TOOL_BASE('P', 'W'), 0, 0, 0, 0, 0);
    for (long r = 0; r < rounds; r++)
        sum = sweep(sum);
    return (void *)(uintptr_t)sum;
}

static void *reader(void *arg)
{
    (void)arg;
    uint64_t sum = 0;
    for (long k = 0; k < line_count; k += 4)
        sum += *line(k) + *line(k + 1);
    return (void *)(uintptr_t)sum;
}

int main(int argc, char **argv)
{
    if (lines_and_rounds(argc, argv, "private_pages", &line_count, 4, MAX_LINES, &rounds, 1))
        return 2;
    if (line_count % 4) {
        fprintf(stderr, "private_pages: LINES must be a multiple of 4\n");
        return 2;
    }
    run_alone(owner);
    run_alone(reader);
    return 0;
}
