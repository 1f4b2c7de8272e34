"""How fast this machine reads memory: the limit a decode step runs into.

    python bench/bandwidth.py [--threads N] [--mb 1024] [--runs 7] [--json]

A decode step reads every weight of the model once, so tokens per second can never exceed (bytes read per second)
/ (bytes of weights). This probe reads one large array (much larger than every cache) on N threads, the way a
matrix x vector kernel does: each thread sums its own contiguous slice of int64 words with several accumulators,
so the loop is limited by memory, not by arithmetic. The figure is the median of several passes, in GB/s
(10^9 bytes). `llmbook bench` divides a model's weight bytes per token by it to say how close decode is to the limit.
"""
import argparse, json, os, statistics, sys, time
import numpy as np
from numba import njit, prange

@njit(parallel=True, cache=True)
def _read_all(words, n_tasks):
    "Sum of every word, as n_tasks contiguous slices summed in parallel (the sum only keeps the reads alive)."
    n = words.size
    partial = np.zeros(n_tasks, np.int64)
    for t in prange(n_tasks):
        # numpy's sum of a slice: numba vectorizes it (a scalar loop in a prange body ran at a quarter of the speed)
        partial[t] = words[t * n // n_tasks:(t + 1) * n // n_tasks].sum()
    return partial.sum()

def read_bandwidth(threads: int | None = None, mb: int = 1024, runs: int = 7) -> dict:
    "Median GB/s of reading an array of `mb` MiB on `threads` threads (default: the physical cores), and every run."
    from llmbook.runtime import set_threads
    n_threads = set_threads(threads)
    words = np.ones(mb * 2**20 // 8, np.int64)         # written once: every page is really there
    _read_all(words[:1024], n_threads)                  # compile (or load from the cache) before timing
    rates = []
    for _ in range(runs):
        t0 = time.perf_counter()
        total = _read_all(words, n_threads)
        rates.append(words.nbytes / (time.perf_counter() - t0) / 1e9)
        assert total == words.size
    return {"threads": n_threads, "mb": mb, "gb_per_s": statistics.median(rates), "runs_gb_per_s": rates}

def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=None, help="threads (default: the physical cores)")
    ap.add_argument("--mb", type=int, default=1024, help="MiB read per pass (default 1024: far past any cache)")
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    r = read_bandwidth(a.threads, a.mb, a.runs)
    if a.json: print(json.dumps(r))
    else: print(f"read bandwidth: {r['gb_per_s']:.1f} GB/s on {r['threads']} threads "
                f"(median of {len(r['runs_gb_per_s'])} passes over {r['mb']} MiB; "
                f"{min(r['runs_gb_per_s']):.1f}-{max(r['runs_gb_per_s']):.1f})")

if __name__ == "__main__":
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    main()
