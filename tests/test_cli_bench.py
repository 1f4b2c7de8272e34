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
    # (one cold run only: it compiles every kernel, minutes on a slow machine; the text report's line is one print)


def test_bench_bad_model_is_one_line(tmp_path):
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF" + b"\0" * 10)
    r = llmbook("bench", "--model", bad, "--cold")
    assert r.returncode != 0 and r.stdout == "" and r.stderr.count("\n") == 1, r.stderr


def test_bench_at_a_depth_counts_the_keys_and_values_it_reads(tmp_path):
    "--depth N: decode after N tokens already in the context; the memory line counts the keys and values read too."
    model = write_random_model(tmp_path / "tiny.gguf")
    runs = {}
    for depth in (0, 200):
        r = llmbook("bench", "--model", model, "--prompt-tokens", "8", "--gen-tokens", "4", "--repeat", "1", "--threads", "1",
                    "--depth", str(depth), "--json")
        assert r.returncode == 0, r.stderr
        runs[depth] = json.loads(r.stdout)
    assert runs[200]["depth"] == 200 and runs[200]["decode"] > 0
    # the same model and cache type: the deeper step reads the keys and values of 200 more positions
    assert runs[200]["decode_kv_bytes"] > runs[0]["decode_kv_bytes"] > 0
    r = llmbook("bench", "--model", model, "--depth", "-1")
    assert r.returncode != 0 and "--depth must be at least 0" in r.stderr and r.stderr.count("\n") == 1
