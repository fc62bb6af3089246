/* What the programs with planted events share (handoff.c, renew.c): threads that run one after
 * the other, and the two numbers they take on the command line. */
#ifndef PLANTED_H
#define PLANTED_H

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

/* Run body in a thread of its own and wait for it to end. */
static void run_alone(void *(*body)(void *))
{
    pthread_t thread;
    if (pthread_create(&thread, NULL, body, NULL) != 0 || pthread_join(thread, NULL) != 0)
        abort();
}

/* [LINES ROUNDS] from argv into *lines and *rounds (kept when absent); 0, or 2 after a usage
 * message when either is out of its range. */
static int lines_and_rounds(int argc, char **argv, const char *name, long *lines, long min_lines, long max_lines,
                            long *rounds, long min_rounds)
{
    if (argc == 3) {
        *lines = strtol(argv[1], NULL, 10);
        *rounds = strtol(argv[2], NULL, 10);
    }
    if (*lines < min_lines || *lines > max_lines || *rounds < min_rounds) {
        fprintf(stderr, "usage: %s [LINES (%ld..%ld) ROUNDS (>= %ld)]\n", name, min_lines, max_lines, min_rounds);
        return 2;
    }
    return 0;
}

#endif
