/* Test program: creates a thread, then dies of SIGSEGV. */
#include <pthread.h>
#include <signal.h>
static void *worker(void *arg) { return arg; }
int main(void)
{
    pthread_t t;
    pthread_create(&t, NULL, worker, NULL);
    pthread_join(t, NULL);
    raise(SIGSEGV);
    return 0;
}
