// Test program: 6 std::threads (plus an idle main thread 0); worker k (thread k+1) shares a line
// with worker k-1 and one with worker k+1: a band in the matrix.
#include <atomic>
#include <cstdio>
#include <thread>
#include <vector>

struct alignas(64) Line { std::atomic<long> value{0}; };

int main()
{
    const int n = 6;
    std::vector<Line> links(n - 1);
    std::vector<std::thread> workers;
    for (int k = 0; k < n; k++)
        workers.emplace_back([&, k] {
            // Pointers copied first: reading the vector in the loop would share its line with all.
            std::atomic<long> *left = k > 0 ? &links[k - 1].value : nullptr;
            std::atomic<long> *right = k + 1 < n ? &links[k].value : nullptr;
            for (long i = 0; i < 300000; i++) {
                if (left) left->fetch_add(1, std::memory_order_relaxed);
                if (right) right->fetch_add(1, std::memory_order_relaxed);
            }
        });
    for (auto &w : workers)
        w.join();
    std::printf("%ld\n", links[0].value.load());
    return 0;
}
