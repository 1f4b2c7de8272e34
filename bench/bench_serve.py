"""`llmbook serve` under load (issues 16, 27 and 37): for 1, 2, 4 and 8 concurrent clients, each sending chat
requests with the official `openai` client (streamed, or with `--no-stream` as one JSON answer each), the aggregate
generated tokens/s, requests/s, and the median and p95 of the time to first token (TTFT) and of the inter-token
latency (ITL).

    python bench/bench_serve.py                       # starts `llmbook serve` on a free port (default model)
    python bench/bench_serve.py --model /work/models/llama1b-q4_k_m.gguf --parallel 8
    python bench/bench_serve.py --parallel 4 --requests 8 --max-tokens 64 --json
    python bench/bench_serve.py --url http://127.0.0.1:8080   # an already running server (llmbook's or llama-server)
    python bench/bench_serve.py --clients 1 --rounds 5 --engine --no-stream     # the server against its own engine

`--engine` measures the engine itself between the server's rounds: the same requests through `LLM.chat` in a process
of its own (the server idle meanwhile), so that a row says what the server costs per token. `--rounds N` runs every
level N times, alternating with the engine, and reports each level's median round (issue 37 asks for five).

Each client sends `--requests` requests one after another (distinct prompts, greedy, `--max-tokens` tokens, the
end-of-turn token banned through logit_bias on llmbook so that every answer has the same length). TTFT is measured at
the client, from sending the request to receiving the first chunk with text (not streamed: the whole answer); ITL is
the time between two chunks with text of one answer (one token each on llmbook). The started server has `--parallel`
slots (default 8, so that every level up to 8 clients is served at once: continuous batching runs their tokens in one
forward pass per step).
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


def one_request(client, topic: str, max_tokens: int, extra: dict, stream: bool = True) -> dict:
    t0 = time.perf_counter()
    arrivals, n_tokens = [], 0
    messages = [{"role": "user", "content": f"Write about {topic}."}]
    if not stream:                                     # one JSON answer: its time to first token is the whole request
        r = client.chat.completions.create(model="x", messages=messages, max_tokens=max_tokens, temperature=0,
                                           extra_body=extra)
        seconds = time.perf_counter() - t0
        return {"ttft": seconds, "itl": [], "tokens": r.usage.completion_tokens, "seconds": seconds}
    stream = client.chat.completions.create(model="x", messages=messages, max_tokens=max_tokens, temperature=0,
                                            stream=True, stream_options={"include_usage": True}, extra_body=extra)
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


def run_level(url: str, n_clients: int, n_requests: int, max_tokens: int, extra: dict, stream: bool = True) -> dict:
    results, lock = [], threading.Lock()
    def client_loop(c):
        client = OpenAI(base_url=url + "/v1", api_key=os.environ.get("LLMBOOK_API_KEY", "none"), max_retries=0, timeout=3600)
        for i in range(n_requests):
            r = one_request(client, TOPICS[(c * n_requests + i) % len(TOPICS)], max_tokens, extra, stream)
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


ENGINE = """
import sys, time, json, llmbook
model = llmbook.load(sys.argv[1] or None, n_threads=int(sys.argv[2]) if sys.argv[2] else None,
                     n_ctx=int(sys.argv[5]), deterministic=True)          # as `llmbook serve` loads it
bias = {t: -100 for t in sorted(model.tokenizer.eog_ids)}
topics, max_tokens = json.loads(sys.argv[3]), int(sys.argv[4])
model.chat([{"role": "user", "content": "Write about warm-up."}], max_tokens=4, logit_bias=bias)
for line in sys.stdin:                       # a line asks for a round: the same requests, one after another
    t0, tokens = time.perf_counter(), 0
    for topic in topics:
        c = model.chat([{"role": "user", "content": f"Write about {topic}."}], max_tokens=max_tokens, logit_bias=bias)
        tokens += len(c.tokens)
    print(json.dumps({"tokens": tokens, "seconds": time.perf_counter() - t0}), flush=True)
"""


class Engine:
    "The engine alone in a process of its own, answering one client's requests as `LLM.chat` calls (the baseline)."
    def __init__(self, args, topics: list):
        self.proc = subprocess.Popen([sys.executable, "-c", ENGINE, args.model or "", str(args.threads or ""),
                                      json.dumps(topics), str(args.max_tokens), str(args.n_ctx)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    def round(self) -> float:
        "Generated tokens per second over one round of the requests."
        self.proc.stdin.write("go\n"); self.proc.stdin.flush()
        r = json.loads(self.proc.stdout.readline())
        return r["tokens"] / r["seconds"]
    def close(self): self.proc.stdin.close(); self.proc.wait(timeout=30)


def median_row(rows: list) -> dict:
    "The row of the round with the median tokens/s."
    return sorted(rows, key=lambda r: r["tokens_per_s"])[len(rows) // 2]


def table(rows: list) -> str:
    head = f"{'clients':>7} {'requests':>8} {'tok/s':>7} {'vs first':>9} {'req/s':>6} " \
           f"{'TTFT median':>11} {'TTFT p95':>9} {'ITL median':>10} {'ITL p95':>8}"
    lines = [head, "-" * len(head)]
    ms = lambda x, w, d: f"{x:{w}.{d}f} ms" if x == x else f"{'-':>{w + 3}}"     # nan: no stream, no ITL
    for r in rows:
        lines.append(f"{r['clients']:7d} {r['requests']:8d} {r['tokens_per_s']:7.1f} {r['tokens_per_s'] / rows[0]['tokens_per_s']:8.2f}x "
                     f"{r['requests_per_s']:6.2f} {ms(r['ttft_ms_median'], 8, 0)} {ms(r['ttft_ms_p95'], 6, 0)} "
                     f"{ms(r['itl_ms_median'], 7, 1)} {ms(r['itl_ms_p95'], 5, 1)}")
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
    p.add_argument("--no-stream", dest="stream", action="store_false", help="plain JSON answers, not streamed")
    p.add_argument("--rounds", type=int, default=1,
                   help="run every level this many times; report the median (default 1)")
    p.add_argument("--engine", action="store_true",
                   help="measure the engine alone (LLM.chat on --model, one client's requests) between rounds, as the "
                        "baseline (with --url, give the server's model as --model)")
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
        levels = [int(n) for n in args.clients.split(",")]
        engine = Engine(args, TOPICS[:args.requests]) if args.engine else None
        runs, engine_runs = {n: [] for n in levels}, []
        for k in range(args.rounds):
            for n in levels:
                runs[n].append(run_level(url, n, args.requests, args.max_tokens, extra, args.stream))
                if not args.json: print(f"  round {k + 1}, {n} client(s): {runs[n][-1]['tokens_per_s']:.1f} tok/s",
                                        file=sys.stderr, flush=True)
            if engine:
                engine_runs.append(engine.round())
                if not args.json: print(f"  round {k + 1}, the engine alone: {engine_runs[-1]:.1f} tok/s",
                                        file=sys.stderr, flush=True)
        rows = [median_row(runs[n]) for n in levels]
        if engine: engine.close()
    finally:
        if proc is not None: proc.terminate(); proc.wait(timeout=10)
    engine_tps = sorted(engine_runs)[len(engine_runs) // 2] if engine_runs else None
    if args.json:
        print(json.dumps({"url": url, "model": args.model or "SmolLM2-135M-Instruct (embedded)", "parallel": args.parallel,
                          "max_tokens": args.max_tokens, "stream": args.stream, "rounds": args.rounds,
                          "levels": [{k: None if v != v else v for k, v in r.items()} for r in rows],   # NaN: none measured
                          "engine_tokens_per_s": engine_tps}, indent=1))
    else:
        print(f"{args.model or 'SmolLM2-135M-Instruct (embedded)'}: {args.parallel} slots, {args.requests} requests per client, "
              f"{args.max_tokens} tokens each, {'streamed' if args.stream else 'not streamed'}"
              f"{f', median of {args.rounds} rounds' if args.rounds > 1 else ''} "
              f"(tok/s: generated tokens of all clients per second of wall time)")
        print(table(rows))
        if engine_tps:
            print(f"the engine alone (LLM.chat, the same requests): {engine_tps:.1f} tok/s; "
                  f"one client through the server: {rows[0]['tokens_per_s'] / engine_tps:.2f}x of it")


if __name__ == "__main__":
    main()
