"""Chapter 21's quantizer on tiny random models (fast): the per-tensor rules, the files it writes, the refusals, the
progress bar, and the measurement's own checks. tests/test_quantize.py compares the files with llama.cpp's."""
import io
import numpy as np
import pytest
from llmbook.gguf import GGUFFile
from llmbook.loading import load
from llmbook.tensors import GGMLType
from llmbook.quantize import (quantize_model, quantize_plan, file_type, _layer_of, _llama_cpp_order, _use_more_bits,
                              evaluation_windows, measure, _ProgressBar, SAMPLE_TEXT, FILE_TYPES)
from llmbook.testmodels import write_random_chat_model


def rms(e): return float(np.sqrt(np.mean(np.square(e))))


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    "8 layers of width 320 (not a multiple of 256), n_ff 512 (a multiple), F32 weights, untied output."
    return write_random_chat_model(tmp_path_factory.mktemp("q") / "tiny-f32.gguf", n_layers=8, n_embd=320, n_heads=5,
                                   n_kv_heads=1, head_dim=64, n_ff=512, wtype="F32", seed=1)


def test_q4_k_m_plan(tiny):
    with GGUFFile(tiny) as f: plan = quantize_plan(f, "Q4_K_M")
    down = {_layer_of(p.name): p.dst.name for p in plan if "ffn_down" in p.name}
    assert down == {i: "Q6_K" if _use_more_bits(i, 8) else "Q4_K" for i in range(8)}
    assert [i for i in range(8) if _use_more_bits(i, 8)] == [0, 3, 6, 7]
    assert {p.dst for p in plan if "attn_q." in p.name} == {GGMLType.Q5_0}          # Q4_K's fallback
    assert {p.dst for p in plan if "attn_v." in p.name} == {GGMLType.Q5_0, GGMLType.Q8_0}   # Q6_K's fallback: Q8_0
    out = next(p for p in plan if p.name == "output.weight")
    assert out.dst == GGMLType.Q8_0 and out.why == "output matrix"
    assert all(not p.converted for p in plan if len(p.shape) == 1)                   # norms stay F32
    assert [p.name for p in plan] == _llama_cpp_order(p.name for p in plan)


def test_q4_k_s_plan(tiny):
    with GGUFFile(tiny) as f: plan = quantize_plan(f, "Q4_K_S")
    assert [_layer_of(p.name) for p in plan if p.dst.name == "Q5_K" and "ffn_down" in p.name] == [0]
    assert {_layer_of(p.name): p.dst.name for p in plan if "attn_v." in p.name} == \
        {i: "Q5_1" if i < 4 else "Q5_0" for i in range(8)}                          # Q5_K and Q4_K, fallen back


def test_written_files(tiny, tmp_path):
    errors = {}
    with GGUFFile(tiny) as src:
        for t in ("Q8_0", "Q5_0", "Q4_1", "Q4_0", "Q4_K_M"):
            r = quantize_model(tiny, tmp_path / f"tiny-{t}.gguf", t, progress=False)
            with GGUFFile(r.path) as out:
                assert out.metadata["general.file_type"] == file_type(t).id
                assert out.metadata["general.quantization_version"] == 2
                skip = ("general.file_type", "general.quantization_version")
                assert {k: v for k, v in out.metadata.items() if k not in skip} == \
                       {k: v for k, v in src.metadata.items() if k not in skip}
                assert list(out.metadata)[-2:] == list(skip)[::-1]                  # moved to the end
                assert list(out.tensors) == _llama_cpp_order(src.tensors)
                errors[t] = 0.0
                for p in r.plan:
                    assert out.tensors[p.name].ggml_type == p.dst
                    a, b = src.dequantize(p.name), out.dequantize(p.name)
                    if not p.converted: assert np.array_equal(a, b)
                    else:
                        errors[t] = max(errors[t], rms(a - b) / rms(a))
                        assert rms(a - b) < (0.02 if t == "Q8_0" else 0.2) * rms(a), (t, p.name)
                assert out.file_size == r.path.stat().st_size
                assert r.dst_bytes == sum(t_.n_bytes for t_ in out.tensors.values())
    assert errors["Q8_0"] < errors["Q5_0"] < errors["Q4_0"]


def test_refusals(tiny, tmp_path):
    with pytest.raises(ValueError, match="unknown quantization type 'Q3_XL'"): quantize_model(tiny, tmp_path / "x.gguf", "Q3_XL")
    with pytest.raises(ValueError, match="must differ"): quantize_model(tiny, tiny, "Q8_0")
    narrow = write_random_chat_model(tmp_path / "narrow.gguf", n_embd=64, n_ff=48, wtype="F32")
    with pytest.raises(ValueError, match="rows of 48 values cannot be split into Q4_0 blocks"):
        quantize_model(narrow, tmp_path / "narrow-q4_0.gguf", "Q4_0", progress=False)
    assert not (tmp_path / "narrow-q4_0.gguf").exists()
    r = quantize_model(narrow, tmp_path / "narrow-q4_k.gguf", "Q4_K", progress=False)
    assert {p.dst for p in r.plan if "ffn_down" in p.name} == {GGMLType.F16}
    assert r.ftype == FILE_TYPES["Q4_K_M"]                                           # the alias


def test_nan_names_the_tensor_and_leaves_nothing(tiny, tmp_path):
    broken = tmp_path / "nan.gguf"
    broken.write_bytes(tiny.read_bytes())
    with GGUFFile(broken) as f: at = f.tensors["blk.2.ffn_up.weight"].offset
    with open(broken, "r+b") as fh: fh.seek(at + 4 * 1000); fh.write(np.float32(np.nan).tobytes())
    with pytest.raises(ValueError, match="blk.2.ffn_up.weight"):
        quantize_model(broken, tmp_path / "nan-q8_0.gguf", "Q8_0", progress=False)
    assert not (tmp_path / "nan-q8_0.gguf").exists() and not list(tmp_path.glob("*.tmp"))


def test_progress_bar_in_a_log():
    log = io.StringIO()
    bar = _ProgressBar(1000, "demo", file=log)
    for done in range(0, 1001, 50): bar.update(done, f"step {done}")
    bar.close()
    assert log.getvalue().count("\n") == 11 and "100%" in log.getvalue()            # a line per tenth


def test_evaluation_windows():
    assert evaluation_windows(range(10), 4) == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert evaluation_windows(range(10), 4, bos=99) == [[99, 1, 2, 3], [99, 5, 6, 7]]
    with pytest.raises(ValueError, match="fewer than one window"): evaluation_windows(range(3), 4)
    with pytest.raises(ValueError, match="at least 4"): evaluation_windows(range(30), 3)


def test_measure(tmp_path):
    soft = write_random_chat_model(tmp_path / "soft-f32.gguf", n_layers=4, n_embd=256, n_heads=4, n_kv_heads=2,
                                   head_dim=64, n_ff=512, wtype="F32", seed=3)
    files = {t: quantize_model(soft, tmp_path / f"soft-{t}.gguf", t, progress=False).path for t in ("Q8_0", "Q5_0", "Q4_0")}
    ref = load(soft)
    ids = ref.tokenizer.encode(SAMPLE_TEXT)
    orig, scores = measure(ref, {"itself": ref} | {t: load(p) for t, p in files.items()}, ids, n_ctx=64)
    assert scores["itself"].mean_kl == 0 and scores["itself"].top1 == 1
    assert scores["itself"].perplexity == orig.perplexity and orig.n_tokens == len(ids) // 64 * 31
    assert 0 < scores["Q8_0"].mean_kl < scores["Q5_0"].mean_kl < scores["Q4_0"].mean_kl
    assert all(s.kl_quantile(0.99) >= s.mean_kl for s in scores.values())
