/* Test program: thread k (main = 0, then in creation order) makes (k+1) x 200000 private
 * accesses, so its access count tells its creation index. With an argument, dies of SIGKILL
 * after that many seconds of work (to test what a killed trace keeps). */
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <time.h>

static void *work(void *arg)
{
    long k = (long)arg;
    volatile long *cells = calloc(64, sizeof(long));
    for (long i = 0; i < (k + 1) * 200000; i++)
        cells[i % 64]++;
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc > 1) {
        time_t end = time(NULL) + atoi(argv[1]);
        volatile long cell = 0;
        while (time(NULL) < end)
            cell++;
        raise(SIGKILL);
    }
    pthread_t t[4];
    for (long k = 1; k <= 4; k++)
        pthread_create(&t[k - 1], NULL, work, (void *)k);
    work((void *)0);
    for (int k = 0; k < 4; k++)
        pthread_join(t[k], NULL);
    return 0;
}
