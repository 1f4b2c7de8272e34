"""Dequantize real model tensors with llmbook and with gguf-py: the results must be identical, bit for bit.

For each model and each tensor type in it, we check the largest tensor of that type and two more (the first
and the middle one in file order), so every type's layout is exercised on real data.
"""
import numpy as np
import pytest
import gguf

from llmbook.gguf import GGUFFile
import llmbook.quants  # noqa: F401  (adds GGUFFile.dequantize)


def tensors_to_check(reader: gguf.GGUFReader) -> dict:
    "name -> gguf-py tensor: per type, the largest tensor plus the first and the middle one."
    by_type = {}
    for t in reader.tensors: by_type.setdefault(t.tensor_type.name, []).append(t)
    chosen = {}
    for ts in by_type.values():
        for t in {max(ts, key=lambda t: t.n_elements).name: None, ts[0].name: None, ts[len(ts) // 2].name: None}:
            chosen[t] = next(x for x in ts if x.name == t)
    return chosen


def test_real_model_dequantize_matches_gguf_py(real_model_path):
    reader = gguf.GGUFReader(real_model_path)
    chosen = tensors_to_check(reader)
    types_seen = set()
    with GGUFFile(real_model_path) as f:
        for name, t in chosen.items():
            ours = f.dequantize(name)
            ref = gguf.quants.dequantize(np.asarray(t.data), t.tensor_type).reshape(ours.shape)
            assert ours.dtype == np.float32 and ours.shape == tuple(int(d) for d in reversed(t.shape)), name
            assert np.array_equal(ours.view(np.uint32), ref.astype(np.float32).view(np.uint32)), f"{name} ({t.tensor_type.name}) differs"
            types_seen.add(t.tensor_type.name)
    expected = {"SmolLM2-135M-Instruct.Q4_1.gguf": {"F32", "Q4_1", "Q8_0"},
                "gemma-3-270m-q4_k_m.gguf": {"F32", "Q8_0", "Q5_0", "Q4_K", "Q6_K"}}[real_model_path.name]
    assert types_seen == expected


def test_real_classic_blocks_are_a_fixed_point(real_model_path):
    """llama.cpp made these Q4_1/Q5_0/Q8_0 blocks with the same reference rules we follow, so quantizing their
    dequantized values again must give back exactly the bytes in the file (measured: every block, both models)."""
    from llmbook.quants import dequantize, quantize
    checked = 0
    with GGUFFile(real_model_path) as f:
        for name in f.tensors:
            qt = f.qtensor(name)
            if qt.type.name not in ("Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0") or qt.size > 4_000_000: continue
            again = quantize(dequantize(qt), qt.type)
            assert np.array_equal(again.data, qt.data), f"{name} ({qt.type.name}): requantized blocks differ"
            checked += 1
    assert checked >= 10
