/* Test program (issue 13): each thread calls a shared-library function (libm's log) on private
   data, like NPB EP. Nothing is shared between the threads but the loader's tables (the GOT, and
   the PLT when built without -fno-plt): a tracer must find no communication. Usage: libm_private
   [threads [calls per thread]]. Built twice by the tests: plain (lazy binding through the PLT),
   and with -fno-plt -Wl,-z,now (the GOT is read-only after start-up: RELRO). */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static long calls = 20000;

struct slot { _Alignas(64) double sum; };
static struct slot results[256];

static void* work(void* arg)
{
    long me = (long)arg;
    double local[64];
    for (int k = 0; k < 64; k++) local[k] = 1.0 + me + k;
    double sum = 0;
    for (long i = 0; i < calls; i++) sum += log(local[i & 63] + (double)i);
    results[me].sum = sum;
    return NULL;
}

int main(int argc, char** argv)
{
    int threads = argc > 1 ? atoi(argv[1]) : 4;
    if (argc > 2) calls = atol(argv[2]);
    if (threads < 1 || threads > 256) return 2;
    pthread_t ids[256];
    for (long t = 1; t < threads; t++) pthread_create(&ids[t], NULL, work, (void*)t);
    work((void*)0);
    double total = results[0].sum;
    for (long t = 1; t < threads; t++) {
        pthread_join(ids[t], NULL);
        total += results[t].sum;
    }
    printf("%.3f\n", total);
    return 0;
}
