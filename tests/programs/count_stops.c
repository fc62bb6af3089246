/* Test program: counts the SIGINTs and SIGTERMs it gets and exits with that count.
 *
 *   count_stops TAG
 *
 * Runs a worker thread beside main (a program to sample has two), and once the first stop signal
 * has come waits half a second more for any other, then exits: status 1 when a Ctrl-C reached it
 * once, 2 when it was passed on twice (a program whose second Ctrl-C means "quit now" would have
 * quit). TAG only names the run on its command line, for pgrep. */
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static volatile sig_atomic_t stops;

static void count(int signum)
{
    (void)signum;
    stops++;
}

static void nap(long ms)
{
    struct timespec left = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&left, &left) != 0)
        continue;
}

static void *worker(void *arg)
{
    volatile unsigned long spin = 0;
    for (;;) {
        for (int i = 0; i < 100000; i++)
            spin++;
        nap(1);
    }
    return arg;
}

int main(void)
{
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = count;
    sigemptyset(&action.sa_mask);
    sigaction(SIGINT, &action, NULL);
    sigaction(SIGTERM, &action, NULL);
    pthread_t t;
    pthread_create(&t, NULL, worker, NULL);
    while (!stops)
        nap(10);
    nap(500);
    exit(stops);
}
