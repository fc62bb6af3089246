"""Test program: Python threads record their native TIDs and wait until stdin closes."""
import os
import sys
import threading

n = int(sys.argv[1]) if len(sys.argv) > 1 else 4
tids = [0] * n
ready = threading.Barrier(n + 1)
release = threading.Event()


def worker(i):
    tids[i] = threading.get_native_id()
    ready.wait()
    release.wait()


threads = [threading.Thread(target=worker, args=(i,)) for i in range(n)]
for t in threads:
    t.start()
ready.wait()
print(f"ready {os.getpid()}")
print(f"thread 0 {threading.get_native_id()}")
for i, tid in enumerate(tids):
    print(f"thread {i + 1} {tid}")
print("end", flush=True)
sys.stdin.read()
release.set()
for t in threads:
    t.join()
