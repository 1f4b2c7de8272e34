"""`llmbook quantize`, `perplexity` and `bench` as a user runs them, on a tiny random chat model (Q8_0 weights and a
tokenizer): subprocesses, stdout, stderr, exit status."""
import json
import pytest
from conftest import llmbook
from llmbook.gguf import GGUFFile
from llmbook.quantize import file_type
from llmbook.testmodels import write_random_chat_model


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return write_random_chat_model(tmp_path_factory.mktemp("cliq") / "tiny.gguf")


@pytest.fixture(scope="module")
def words(tmp_path_factory):
    p = tmp_path_factory.mktemp("text") / "words.txt"
    p.write_text(" ".join(["the cat sat on the mat"] * 40))
    return p


def one_error_line(r, *words):
    assert r.returncode == 1 and r.stdout == "" and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr, r.stderr
    for w in words: assert w in r.stderr, r.stderr


def test_quantize(tiny, tmp_path):
    out = tmp_path / "tiny-q4_0.gguf"
    r = llmbook("quantize", tiny, out, "--type", "q4_0", "--quiet", "--allow-requantize")
    assert r.returncode == 0 and r.stdout.count("\n") == 1 and r.stderr == "", r.stderr
    assert "Q4_0" in r.stdout and "bits/weight" in r.stdout
    with GGUFFile(out) as f: assert f.metadata["general.file_type"] == file_type("Q4_0").id
    r = llmbook("quantize", tiny, tmp_path / "bar.gguf", "--type", "Q8_0", "--allow-requantize")   # the progress bar, on stderr
    assert r.returncode == 0 and "quantize Q8_0" in r.stderr and "100%" in r.stderr and r.stdout.count("\n") == 1


def test_quantize_errors(tiny, tmp_path):
    one_error_line(llmbook("quantize", tiny, tmp_path / "x.gguf", "--type", "Q9"), "unknown quantization type")
    assert not (tmp_path / "x.gguf").exists()
    one_error_line(llmbook("quantize", tiny, tiny, "--type", "Q8_0", "--allow-requantize"), "must differ")
    one_error_line(llmbook("quantize", tmp_path / "missing.gguf", tmp_path / "y.gguf"), "missing.gguf")
    # weights already quantized are rounded a second time only with a warning (--allow-requantize silences it;
    # llama-quantize refuses, but `llmbook quantize IN OUT` on any GGUF is the public contract); a missing folder is
    # said as such
    r = llmbook("quantize", tiny, tmp_path / "z.gguf", "--type", "Q4_0", "--quiet")
    assert r.returncode == 0 and (tmp_path / "z.gguf").exists() and r.stderr.count("\n") == 1
    assert "warning" in r.stderr and "already quantized (Q8_0)" in r.stderr and "--allow-requantize" in r.stderr
    one_error_line(llmbook("quantize", tiny, tmp_path / "no" / "such" / "z.gguf", "--allow-requantize"),
                   "no such folder for the output", str(tmp_path / "no" / "such"))


def test_perplexity_against_a_reference(tiny, words, tmp_path):
    q = tmp_path / "tiny-q4_0.gguf"
    assert llmbook("quantize", tiny, q, "--type", "Q4_0", "--quiet", "--allow-requantize").returncode == 0
    r = llmbook("perplexity", "--model", q, "--reference", tiny, "--text", words, "--ctx", "32", "--json")
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout)
    assert res["mean_kl"] > 0 and 0 < res["top1_agreement"] <= 1 and res["scored_tokens"] > 0 and res["perplexity"] > 1
    assert res["kl_p99"] >= res["mean_kl"] and res["reference_perplexity"] > 1 and res["ctx"] == 32
    r = llmbook("perplexity", "--model", tiny, "--reference", tiny, "--text", words, "--ctx", "32", "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["mean_kl"] == 0 and json.loads(r.stdout)["top1_agreement"] == 1
    r = llmbook("perplexity", "--model", q, "--reference", tiny, "--text", words, "--ctx", "32")
    assert r.returncode == 0 and "KL divergence: mean" in r.stdout and "top-1 agreement" in r.stdout
    # the standard error, as llama-perplexity's `PPL = x +/- e`: exp(mean) * std / sqrt(n - 1) of the tokens' -log q
    ppl, err = map(float, r.stdout.split("perplexity:")[1].split("\n")[0].split("±"))
    assert abs(ppl - res["perplexity"]) < 1e-3 and 0 < err < ppl and abs(err - res["perplexity_error"]) < 1e-3
    r = llmbook("perplexity", "--model", tiny, "--text", "-", "--ctx", "32", "--json", input=words.read_text())
    assert r.returncode == 0 and "mean_kl" not in json.loads(r.stdout)


def test_perplexity_errors(tiny, words):
    r = llmbook("perplexity", "--model", tiny, "--text", words, "--ctx", "4096")
    assert r.returncode == 1 and "fewer than one window" in r.stderr.splitlines()[-1] and "Traceback" not in r.stderr


def test_bench_report_and_json(tiny):
    r = llmbook("bench", "--model", tiny, "--prompt-tokens", "8", "--gen-tokens", "8")
    assert r.returncode == 0, r.stderr
    assert all(w in r.stdout for w in ("prefill", "decode", "threads", "kernels", "first run"))
    r = llmbook("bench", "--model", tiny, "--prompt-tokens", "8", "--gen-tokens", "4", "--json", "--threads", "1")
    res = json.loads(r.stdout)
    assert r.returncode == 0 and res["prefill"] > 0 and res["decode"] > 0 and res["threads"] == 1
    assert res["numba_cache"] in ("cold", "warm") and res["n_prompt"] == 8 and res["n_gen"] == 4
    one_error_line(llmbook("bench", "--model", tiny, "--gen-tokens", "0"), "--gen-tokens")
