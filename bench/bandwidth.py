"""How fast this machine reads memory: the limit a decode step runs into (chapter 11's `read_bandwidth`).

    python bench/bandwidth.py [--threads N] [--mb 512] [--runs 5] [--json]

A decode step reads every weight of the model once, so tokens per second can never exceed (bytes read per second)
/ (bytes of weights). `llmbook bench` states its decode speed as a fraction of this figure.
"""
import argparse, json, os, sys
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from llmbook.runtime import cpu_summary, read_bandwidth, set_threads

def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=None, help="threads (default: the physical cores)")
    ap.add_argument("--mb", type=int, default=512, help="MiB read per pass (default 512: far past any cache)")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    r = dict(cpu=cpu_summary(), threads=set_threads(a.threads), gb_per_s=read_bandwidth(a.threads, a.mb, a.runs))
    if a.json: print(json.dumps(r))
    else: print(f"{r['cpu']['model']} ({', '.join(r['cpu']['isa'])}): reads {r['gb_per_s']:.1f} GB/s on {r['threads']} threads")

if __name__ == "__main__":
    main()
