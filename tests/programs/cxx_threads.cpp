// Test program: std::thread workers record their TIDs, then wait until stdin closes.
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <sys/syscall.h>
#include <thread>
#include <unistd.h>
#include <vector>

int main(int argc, char **argv)
{
    int n = argc > 1 ? std::atoi(argv[1]) : 4;
    std::vector<long> tids(n, 0);
    std::mutex lock;
    std::condition_variable cv;
    int started = 0;
    bool released = false;
    std::vector<std::thread> threads;
    for (int i = 0; i < n; i++)
        threads.emplace_back([&, i] {
            std::unique_lock<std::mutex> guard(lock);
            tids[i] = syscall(SYS_gettid);
            started++;
            cv.notify_all();
            cv.wait(guard, [&] { return released; });
        });
    {
        std::unique_lock<std::mutex> guard(lock);
        cv.wait(guard, [&] { return started == n; });
    }
    std::printf("ready %d\nthread 0 %ld\n", (int)getpid(), (long)syscall(SYS_gettid));
    for (int i = 0; i < n; i++)
        std::printf("thread %d %ld\n", i + 1, tids[i]);
    std::printf("end\n");
    std::fflush(stdout);
    char buf[64];
    while (read(0, buf, sizeof buf) > 0) {
    }
    {
        std::lock_guard<std::mutex> guard(lock);
        released = true;
    }
    cv.notify_all();
    for (auto &t : threads)
        t.join();
    return 0;
}
