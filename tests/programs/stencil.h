/* What the stencil test programs share (omp_stencil.c, spin_stencil.c): a 2-D 5-point Jacobi sweep
   over a grid of WIDTH columns split in blocks of rows, one per thread, each reading its
   neighbours' boundary rows every step: the neighbour pattern of NPB's solvers, and nothing else.
   Each thread first touches and sums its own block, and the settings sit in a line of their own
   that nobody writes once the threads run, so that no line but a boundary row is shared (besides
   the program's barrier). Usage of both: PROGRAM [threads [steps [rows per thread]]]. */
#ifndef STENCIL_H
#define STENCIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WIDTH 64   /* columns: a row is 8 cache lines */

static struct {
    _Alignas(64) int threads, steps, rows;
    double (*grid[2])[WIDTH];
} settings = {.threads = 4, .steps = 2000, .rows = 8};

/* Before the first step: thread me's rows of both grids, first touched by it. */
static void own_block(int me)
{
    long first = 1 + (long)me * settings.rows;
    for (int g = 0; g < 2; g++)
        memset(settings.grid[g][first], 0, sizeof(double) * WIDTH * (size_t)settings.rows);
}

/* Thread me's sweep of step: its rows [first, last) from the other grid, the rows above and below
   (its neighbours' boundaries, or the walls) included. */
static void sweep_block(int me, int step)
{
    long first = 1 + (long)me * settings.rows, last = first + settings.rows;
    double (*from)[WIDTH] = settings.grid[step & 1], (*to)[WIDTH] = settings.grid[(step + 1) & 1];
    for (long r = first; r < last; r++)
        for (int c = 1; c < WIDTH - 1; c++)
            to[r][c] = (from[r - 1][c] + from[r + 1][c] + from[r][c - 1] + from[r][c] + from[r][c + 1]) / 5.0;
}

/* Thread me's share of the checksum: its own rows only. */
static double block_sum(int me)
{
    double sum = 0;
    for (long r = 1 + (long)me * settings.rows; r < 1 + (long)(me + 1) * settings.rows; r++)
        for (int c = 0; c < WIDTH; c++)
            sum += settings.grid[settings.steps & 1][r][c];
    return sum;
}

/* [threads [steps [rows]]] into the settings, and the two grids (each block untouched until its
   thread's own_block, the wall rows set); 0, or 2 after a usage message. */
static int stencil_setup(int argc, char **argv, const char *name)
{
    if (argc > 1) settings.threads = atoi(argv[1]);
    if (argc > 2) settings.steps = atoi(argv[2]);
    if (argc > 3) settings.rows = atoi(argv[3]);
    if (settings.threads < 1 || settings.threads > 256 || settings.steps < 1 || settings.rows < 1) {
        fprintf(stderr, "usage: %s [threads (1..256) [steps [rows per thread]]]\n", name);
        return 2;
    }
    long rows = (long)settings.threads * settings.rows + 2;
    for (int g = 0; g < 2; g++) {
        settings.grid[g] = aligned_alloc(64, sizeof(double) * WIDTH * (size_t)rows);
        if (settings.grid[g] == NULL)
            return 2;
        for (int c = 0; c < WIDTH; c++) {
            settings.grid[g][0][c] = 1.0;  /* a hot top wall: heat flows through every block */
            settings.grid[g][rows - 1][c] = 0.0;
        }
    }
    return 0;
}

#endif
