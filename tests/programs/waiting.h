/* What the programs that keep their threads alive for a test share (threads.c, mask_sized.c,
 * spawn_child.c, fork_pool.c): workers that record their TID and wait until released, and the wait
 * for standard input to close, which is how a test says it has read /proc. */
#ifndef WAITING_H
#define WAITING_H

#define _GNU_SOURCE
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

__attribute__((unused)) static pthread_barrier_t waiting_started;
__attribute__((unused)) static pthread_mutex_t waiting_lock = PTHREAD_MUTEX_INITIALIZER;
__attribute__((unused)) static pthread_cond_t waiting_release = PTHREAD_COND_INITIALIZER;
__attribute__((unused)) static int waiting_released;

static inline void *waiting_worker(void *tid)
{
    *(long *)tid = syscall(SYS_gettid);
    pthread_barrier_wait(&waiting_started);
    pthread_mutex_lock(&waiting_lock);
    while (!waiting_released)
        pthread_cond_wait(&waiting_release, &waiting_lock);
    pthread_mutex_unlock(&waiting_lock);
    return NULL;
}

/* Start n workers, each writing its TID into tids[i]; returns once every one has. */
static inline void start_waiting_workers(int n, pthread_t *threads, long *tids)
{
    pthread_barrier_init(&waiting_started, NULL, (unsigned)n + 1);
    for (int i = 0; i < n; i++)
        pthread_create(&threads[i], NULL, waiting_worker, &tids[i]);
    pthread_barrier_wait(&waiting_started);
}

/* Release the n workers and join them. */
static inline void release_waiting_workers(int n, pthread_t *threads)
{
    pthread_mutex_lock(&waiting_lock);
    waiting_released = 1;
    pthread_cond_broadcast(&waiting_release);
    pthread_mutex_unlock(&waiting_lock);
    for (int i = 0; i < n; i++)
        pthread_join(threads[i], NULL);
}

/* Read descriptor fd until it closes (end of file or error). */
static inline void wait_until_closed(int fd)
{
    char buf[64];
    while (read(fd, buf, sizeof buf) > 0)
        ;
}

#endif
