"""`llmbook bench` as a user runs it: the report, --json, and --cold (a fresh process compiling on an empty numba cache)."""
import json
from conftest import llmbook
from llmbook.testmodels import write_random_model

def test_bench_cold_compiles_in_a_fresh_process(tmp_path):
    model = write_random_model(tmp_path / "tiny.gguf")
    r = llmbook("bench", "--model", model, "--prompt-tokens", "8", "--gen-tokens", "4", "--threads", "1", "--cold", "--json")
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout)
    # the warm pass in this process loads kernels from the real cache; the cold one compiles them: seconds, not ms
    assert res["cold_start_s"] > 1.0 and res["cold_start_s"] > 3 * res["first_pass_s"]
    assert res["prefill"] > 0 and res["decode"] > 0
    r = llmbook("bench", "--model", model, "--prompt-tokens", "8", "--gen-tokens", "4", "--threads", "1", "--cold")
    assert r.returncode == 0 and "empty numba cache" in r.stdout


def test_bench_bad_model_is_one_line(tmp_path):
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF" + b"\0" * 10)
    r = llmbook("bench", "--model", bad, "--cold")
    assert r.returncode != 0 and r.stdout == "" and r.stderr.count("\n") == 1, r.stderr
