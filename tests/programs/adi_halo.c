/* Test program (issue 39): an ADI solver's time step as OpenMP codes write it (NPB SP/BT, the ADI
   kernels), with pthreads. The grid's rows are split in blocks, one per thread. Each step:
   - the right-hand side, a 5-point stencil with a fourth-order dissipation (i-2 .. i+2, as SP's)
     on the thread's own rows, which reads the last two rows of thread k-1's block and the first
     two of thread k+1's: the halo, read, never written, by the neighbour;
   - the x sweep, a tridiagonal solve along each of the thread's own rows (private);
   - the y sweep, a tridiagonal solve down each column, the columns split in blocks, one per
     thread: each thread reads and writes a block of every thread's rows (all-to-all).
   Barriers (sleeping ones) between the phases. The halo is shared by reads against the owner's
   reads and writes in the same step; the y sweep shares every pair alike.
   Usage: adi_halo [threads [size [steps]]]. Prints a checksum. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static int threads = 8, size = 256, steps = 4;
static double *u, *r;
static pthread_barrier_t phase;

#define U(i, j) u[(long)(i) * size + (j)]
#define R(i, j) r[(long)(i) * size + (j)]

/* A tridiagonal solve (Thomas) of -x[k-1] + 4 x[k] - x[k+1] = b[k] in place, with a scratch row. */
static void solve(double *x, long stride, int n, double *c)
{
    c[0] = -0.25;
    x[0] = x[0] / 4;
    for (int k = 1; k < n; k++) {
        double m = 4 + c[k - 1];
        c[k] = -1 / m;
        x[k * stride] = (x[k * stride] + x[(k - 1) * stride]) / m;
    }
    for (int k = n - 2; k >= 0; k--)
        x[k * stride] -= c[k] * x[(k + 1) * stride];
}

static void *step_loop(void *arg)
{
    int me = (int)(long)arg, rows = size / threads;
    int first = me * rows, last = first + rows;  /* rows [first, last) and columns [first, last) */
    double *scratch = malloc((size_t)size * sizeof(double));
    for (int i = first; i < last; i++)  /* first touch of its own rows */
        for (int j = 0; j < size; j++) {
            U(i, j) = (double)((i * 7 + j * 3) % 11);
            R(i, j) = 0;
        }
    pthread_barrier_wait(&phase);
    for (int s = 0; s < steps; s++) {
        for (int i = first; i < last; i++)  /* right-hand side: reads two edge rows of each neighbour */
            for (int j = 1; j < size - 1; j++) {
                double up = i > 0 ? U(i - 1, j) : 0, down = i < size - 1 ? U(i + 1, j) : 0;
                double up2 = i > 1 ? U(i - 2, j) : 0, down2 = i < size - 2 ? U(i + 2, j) : 0;
                R(i, j) = up + down + U(i, j - 1) + U(i, j + 1) - 4 * U(i, j)  /* and a 4th-order dissipation */
                          - 0.05 * (up2 - 4 * up + 6 * U(i, j) - 4 * down + down2);
            }
        pthread_barrier_wait(&phase);
        for (int i = first; i < last; i++) {  /* x sweep: own rows */
            for (int j = 0; j < size; j++)
                U(i, j) = U(i, j) + 0.1 * R(i, j);
            solve(&U(i, 0), 1, size, scratch);
        }
        pthread_barrier_wait(&phase);
        for (int j = first; j < last; j++)  /* y sweep: own columns, every thread's rows */
            solve(&U(0, j), size, size, scratch);
        pthread_barrier_wait(&phase);
    }
    free(scratch);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc > 1) threads = atoi(argv[1]);
    if (argc > 2) size = atoi(argv[2]);
    if (argc > 3) steps = atoi(argv[3]);
    if (threads < 1 || threads > 256 || size < 2 * threads || size % threads || steps < 1) {
        fprintf(stderr, "usage: adi_halo [threads 1-256 [size, a multiple of threads [steps]]]\n");
        return 2;
    }
    u = malloc((size_t)size * size * sizeof(double));
    r = malloc((size_t)size * size * sizeof(double));
    pthread_barrier_init(&phase, NULL, (unsigned)threads);
    pthread_t ids[256];
    for (long k = 1; k < threads; k++)
        if (pthread_create(&ids[k], NULL, step_loop, (void *)k) != 0)
            return 1;
    step_loop((void *)0L);
    for (int k = 1; k < threads; k++)
        pthread_join(ids[k], NULL);
    double sum = 0;
    for (long i = 0; i < (long)size * size; i += 97)
        sum += u[i];
    printf("checksum %.6f\n", sum);
    return 0;
}
