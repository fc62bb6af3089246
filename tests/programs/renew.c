/* Test program with planted events across a window's end, which the program sets itself (the
 * tool's client request; the tests run it with windows too long to end on their own):
 *
 *   thread 1 writes each of LINES lines once, alone: they are its private lines;
 *   the window ends;
 *   thread 1 touches each line again, its first access in the new window a write (lines 0, 3,
 *            6, ...), a read (1, 4, 7, ...) or a read followed by a write (2, 5, 8, ...), then
 *            reads it ROUNDS more times;
 *   thread 2, after thread 1 ended, reads each line once.
 *
 * Thread 2's reads are in the window in which thread 1 touched the lines again, so each is an
 * event with thread 1 (sharing any: LINES events), or, counting only pairs with a write (sharing
 * write), one for each line thread 1 wrote in that window (two lines of three). The tracer's fast
 * path renews thread 1's cached claim to its private lines when the window changes without
 * touching the lines' records: this checks that those records still learn of thread 1's accesses.
 * Usage: renew [LINES ROUNDS].
 */
#include <stdint.h>

#include "planted.h"
#include <valgrind/valgrind.h>

#define MAX_LINES 65536

static _Alignas(64) unsigned char lines[MAX_LINES * 64];
static long line_count = 3000, rounds = 10;

static volatile uint64_t *line(long k)
{
    return (volatile uint64_t *)(lines + 64 * k);
}

static void *owner(void *arg)
{
    (void)arg;
    for (long k = 0; k < line_count; k++)
        *line(k) = (uint64_t)k;
    VALGRIND_DO_CLIENT_REQUEST_STMT(VG_USERREQ_TOOL_BASE('P', 'W'), 0, 0, 0, 0, 0);
    uint64_t sum = 0;
    for (long k = 0; k < line_count; k++) {
        if (k % 3 == 0)
            *line(k) = (uint64_t)k + 1;
        else
            sum += *line(k);
        if (k % 3 == 2)
            *line(k) = sum;
        for (long r = 0; r < rounds; r++)
            sum += *line(k);
    }
    return (void *)(uintptr_t)sum;
}

static void *reader(void *arg)
{
    (void)arg;
    uint64_t sum = 0;
    for (long k = 0; k < line_count; k++)
        sum += *line(k);
    return (void *)(uintptr_t)sum;
}

int main(int argc, char **argv)
{
    if (lines_and_rounds(argc, argv, "renew", &line_count, 1, MAX_LINES, &rounds, 0))
        return 2;
    run_alone(owner);
    run_alone(reader);
    return 0;
}
