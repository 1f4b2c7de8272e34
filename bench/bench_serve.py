"""`llmbook serve` under load (issues 16 and 27): for 1, 2, 4 and 8 concurrent clients, each sending streaming chat
requests with the official `openai` client, the aggregate generated tokens/s, requests/s, and the median and p95 of
the time to first token (TTFT) and of the inter-token latency (ITL).

    python bench/bench_serve.py                       # starts `llmbook serve` on a free port (default model)
    python bench/bench_serve.py --model /work/models/llama1b-q4_k_m.gguf --parallel 8
    python bench/bench_serve.py --parallel 4 --requests 8 --max-tokens 64 --json
    python bench/bench_serve.py --url http://127.0.0.1:8080   # an already running server (llmbook's or llama-server)

Each client sends `--requests` requests one after another (distinct prompts, greedy, `--max-tokens` tokens, the
end-of-turn token banned through logit_bias on llmbook so that every answer has the same length). TTFT is measured at
the client, from sending the request to receiving the first chunk with text; ITL is the time between two chunks with
text of one answer (one token each on llmbook). The started server has `--parallel` slots (default 8, so that every
level up to 8 clients is served at once: continuous batching runs their tokens in one forward pass per step).
"""
import os, argparse, json, math, socket, subprocess, sys, threading, time
from pathlib import Path
import httpx
from openai import OpenAI

TOPICS = ["the sea", "mountains", "a city at night", "a library", "the moon", "trains", "a garden", "winter",
          "a market", "the desert", "rain", "a lighthouse", "bees", "a violin", "coffee", "a bridge"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(args) -> tuple[subprocess.Popen, str]:
    port = free_port()
    script = Path(sys.executable).parent / "llmbook"
    cmd = [str(script), "serve", "--port", str(port), "--parallel", str(args.parallel), "--n-ctx", str(args.n_ctx)]
    if args.model: cmd += ["--model", args.model]
    if args.threads: cmd += ["--threads", str(args.threads)]
    if args.batch_size: cmd += ["--batch-size", str(args.batch_size)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    for _ in range(1500):
        if proc.poll() is not None: sys.exit(f"llmbook serve exited with {proc.returncode}")
        try:
            if httpx.get(url + "/health", timeout=1).status_code == 200: return proc, url
        except httpx.TransportError: pass
        time.sleep(0.2)
    proc.kill(); sys.exit("llmbook serve did not start")


def one_request(client, topic: str, max_tokens: int, extra: dict) -> dict:
    t0 = time.perf_counter()
    arrivals, n_tokens = [], 0
    stream = client.chat.completions.create(model="x", messages=[{"role": "user", "content": f"Write about {topic}."}],
                                            max_tokens=max_tokens, temperature=0, stream=True,
                                            stream_options={"include_usage": True}, extra_body=extra)
    for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content: arrivals.append(time.perf_counter() - t0)
        if chunk.usage: n_tokens = chunk.usage.completion_tokens
    return {"ttft": arrivals[0] if arrivals else None, "itl": [b - a for a, b in zip(arrivals, arrivals[1:])],
            "tokens": n_tokens, "seconds": time.perf_counter() - t0}


def quantile(xs: list, q: float) -> float:
    "The q-quantile of `xs` (nearest rank), or nan for none."
    if not xs: return float("nan")
    xs = sorted(xs)
    return xs[max(0, math.ceil(q * len(xs)) - 1)]


def run_level(url: str, n_clients: int, n_requests: int, max_tokens: int, extra: dict) -> dict:
    results, lock = [], threading.Lock()
    def client_loop(c):
        client = OpenAI(base_url=url + "/v1", api_key=os.environ.get("LLMBOOK_API_KEY", "none"), max_retries=0, timeout=3600)
        for i in range(n_requests):
            r = one_request(client, TOPICS[(c * n_requests + i) % len(TOPICS)], max_tokens, extra)
            with lock: results.append(r)
    t0 = time.perf_counter()
    threads = [threading.Thread(target=client_loop, args=(c,)) for c in range(n_clients)]
    for t in threads: t.start()
    for t in threads: t.join()
    wall = time.perf_counter() - t0
    ttfts = [r["ttft"] for r in results if r["ttft"] is not None]
    itls = [x for r in results for x in r["itl"]]
    tokens = sum(r["tokens"] for r in results)
    return {"clients": n_clients, "requests": len(results), "seconds": wall, "requests_per_s": len(results) / wall,
            "tokens_per_s": tokens / wall, "tokens": tokens,
            "ttft_ms_median": 1e3 * quantile(ttfts, 0.5), "ttft_ms_p95": 1e3 * quantile(ttfts, 0.95),
            "itl_ms_median": 1e3 * quantile(itls, 0.5), "itl_ms_p95": 1e3 * quantile(itls, 0.95)}


def table(rows: list) -> str:
    head = f"{'clients':>7} {'requests':>8} {'tok/s':>7} {'vs first':>9} {'req/s':>6} " \
           f"{'TTFT median':>11} {'TTFT p95':>9} {'ITL median':>10} {'ITL p95':>8}"
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(f"{r['clients']:7d} {r['requests']:8d} {r['tokens_per_s']:7.1f} {r['tokens_per_s'] / rows[0]['tokens_per_s']:8.2f}x "
                     f"{r['requests_per_s']:6.2f} {r['ttft_ms_median']:8.0f} ms {r['ttft_ms_p95']:6.0f} ms "
                     f"{r['itl_ms_median']:7.1f} ms {r['itl_ms_p95']:5.1f} ms")
    return "\n".join(lines)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--url", default=None, help="a running server (default: start llmbook serve)")
    p.add_argument("--model", default=None, help="a GGUF file for the started server (default: the embedded SmolLM2)")
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--parallel", type=int, default=8, help="slots of the started server (default 8)")
    p.add_argument("--batch-size", type=int, default=None, help="--batch-size of the started server (default: its own)")
    p.add_argument("--n-ctx", type=int, default=1024)
    p.add_argument("--clients", default="1,2,4,8", help="concurrency levels (default 1,2,4,8)")
    p.add_argument("--requests", type=int, default=4, help="requests per client (default 4)")
    p.add_argument("--max-tokens", type=int, default=48)
    p.add_argument("--json", action="store_true", help="print the results as JSON")
    args = p.parse_args()
    proc, url = (None, args.url) if args.url else start_server(args)
    try:
        eog = None
        if proc is not None:                           # llmbook: ban the end-of-turn token, every answer max_tokens long
            import llmbook
            tok = llmbook.load(args.model).tokenizer
            eog = {str(t): -100 for t in sorted(tok.eog_ids)}
        extra = {"logit_bias": eog} if eog else {}
        one_request(OpenAI(base_url=url + "/v1", api_key=os.environ.get("LLMBOOK_API_KEY", "none")), "warm-up", 4, extra)
        rows = []
        for n in args.clients.split(","):
            rows.append(run_level(url, int(n), args.requests, args.max_tokens, extra))
            if not args.json: print(f"  {n} client(s): {rows[-1]['tokens_per_s']:.1f} tok/s", file=sys.stderr, flush=True)
    finally:
        if proc is not None: proc.terminate(); proc.wait(timeout=10)
    if args.json:
        print(json.dumps({"url": url, "model": args.model or "SmolLM2-135M-Instruct (embedded)", "parallel": args.parallel,
                          "max_tokens": args.max_tokens, "levels": rows}, indent=1))
    else:
        print(f"{args.model or 'SmolLM2-135M-Instruct (embedded)'}: {args.parallel} slots, {args.requests} requests per client, "
              f"{args.max_tokens} tokens each (tok/s: generated tokens of all clients per second of wall time)")
        print(table(rows))


if __name__ == "__main__":
    main()
