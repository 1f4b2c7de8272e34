"""GGUFWriter: every value type and several tensor types, read back by llmbook and by gguf-py, exactly."""
import filecmp, struct
import numpy as np
import pytest
import gguf
from llmbook.gguf import GGUFFile, GGUFWriter, GGUFValueType as VT, GGUFError, infer_value_type
from llmbook.tensors import GGMLType, QTensor, row_nbytes

A = VT.ARRAY
INT_LIMITS = {VT.UINT8: (0, 255), VT.INT8: (-128, 127), VT.UINT16: (0, 65535), VT.INT16: (-32768, 32767),
              VT.UINT32: (0, 2**32 - 1), VT.INT32: (-2**31, 2**31 - 1),
              VT.UINT64: (0, 2**64 - 1), VT.INT64: (-2**63, 2**63 - 1)}

# key -> (value, type spec); floats are exactly representable in their type so comparisons are exact
ENTRIES = {f"int.{t.name.lower()}.{end}": (v, t) for t, lims in INT_LIMITS.items() for end, v in zip(("min", "max"), lims)}
ENTRIES.update({
    "float32": (0.15625, VT.FLOAT32),
    "float32.big": (float(np.float32(3.0e38)), VT.FLOAT32),
    "float64": (0.1, VT.FLOAT64),
    "bool.true": (True, VT.BOOL), "bool.false": (False, VT.BOOL),
    "string": ("héllo ▁wörld 🦙\n\t", VT.STRING),
    "string.empty": ("", VT.STRING),
    "arr.string": (["", "a", "▁the", "<|im_end|>", "ü" * 300], (A, VT.STRING)),
    "arr.bool": ([True, False, True], (A, VT.BOOL)),
    "arr.float32": ([0.0, -1.5, 2.25, float(np.float32(1e-7))], (A, VT.FLOAT32)),
    "arr.float64": ([0.1, -1e300, 5e-324], (A, VT.FLOAT64)),
    "arr.empty": ([], (A, VT.INT32)),
    "arr.empty_strings": ([], (A, VT.STRING)),
    "nested.ints": ([[1, 2, 3], [], [4]], (A, (A, VT.INT32))),
    "nested.strings": ([["a", "b"], ["c"]], (A, (A, VT.STRING))),
    "nested.deep": ([[[1.5], [2.5, 3.5]], [[4.5]]], (A, (A, (A, VT.FLOAT32)))),
    "nested.mixed": ([[1, 2], ["x"], [True]], (A, [(A, VT.UINT8), (A, VT.STRING), (A, VT.BOOL)])),
})
for t, (lo, hi) in INT_LIMITS.items():
    ENTRIES[f"arr.{t.name.lower()}"] = ([lo, 0, 1, hi], (A, t))


def _q(t, shape, rng):
    "Random raw bytes of the right size for a quantized tensor (the writer does not look inside blocks)."
    n = int(np.prod(shape[:-1])) * row_nbytes(t, shape[-1])
    return QTensor(rng.integers(0, 256, n, dtype=np.uint8), t, shape)


def make_tensors():
    rng = np.random.default_rng(1)
    return {
        "f32.matrix": rng.standard_normal((3, 8)).astype(np.float32),
        "f32.vector": rng.standard_normal(5).astype(np.float32),          # 20 bytes: forces padding
        "f16.3d": rng.standard_normal((2, 3, 4)).astype(np.float16),
        "f32.4d": rng.standard_normal((2, 1, 3, 4)).astype(np.float32),
        "i32": np.arange(7, dtype=np.int32),
        "q8_0": _q(GGMLType.Q8_0, (4, 64), rng),
        "q4_0": _q(GGMLType.Q4_0, (3, 96), rng),
        "q4_1": _q(GGMLType.Q4_1, (2, 32), rng),
        "q4_k": _q(GGMLType.Q4_K, (2, 256), rng),
        "q6_k": _q(GGMLType.Q6_K, (1, 512), rng),
    }


def tensor_bytes(t):
    return t.data if isinstance(t, QTensor) else np.ascontiguousarray(t).view(np.uint8).reshape(-1)


@pytest.fixture(params=[32, 64, 1])
def written(request, tmp_path):
    w = GGUFWriter(tmp_path / "all.gguf", arch="test", alignment=request.param)
    for k, (v, spec) in ENTRIES.items(): w.add(k, v, spec)
    tensors = make_tensors()
    for name, t in tensors.items(): w.add_tensor(name, t)
    return w.write(), tensors, request.param


def test_read_back_with_llmbook(written):
    path, tensors, alignment = written
    f = GGUFFile(path)
    assert f.version == 3 and f.arch == "test" and f.alignment == alignment
    for k, (v, spec) in ENTRIES.items():
        assert f.metadata[k] == v, k
        assert type(f.metadata[k]) is type(v), k
        assert f.metadata_types[k] == spec, k
    assert list(f.tensors) == list(tensors)
    for name, t in tensors.items():
        info, q = f.tensors[name], f.qtensor(name)
        assert info.offset % alignment == 0 and info.offset >= f.data_offset
        assert info.shape == tuple(t.shape) and info.dims == tuple(t.shape)[::-1]
        assert np.array_equal(q.data, tensor_bytes(t)), name
    f.close()


def _flatten(v):
    return [y for x in v for y in _flatten(x)] if isinstance(v, list) else [v]


def test_read_back_with_gguf_py(written):
    path, tensors, alignment = written
    r = gguf.GGUFReader(path)
    assert r.alignment == alignment
    for k, (v, spec) in ENTRIES.items():
        field = r.fields[k]
        assert int(field.types[0]) == (A if isinstance(spec, tuple) else spec), k
        # gguf-py flattens arrays of arrays; compare leaves
        expected = _flatten(v) if isinstance(spec, tuple) and isinstance(spec[1], (tuple, list)) else v
        got = field.contents()
        if isinstance(spec, tuple) and isinstance(spec[1], list): continue   # gguf-py cannot read mixed nesting
        assert got == expected, k
    assert [t.name for t in r.tensors] == list(tensors)
    for t in r.tensors:
        ours = tensors[t.name]
        expect_type = ours.type.name if isinstance(ours, QTensor) else {np.float32: "F32", np.float16: "F16", np.int32: "I32"}[ours.dtype.type]
        assert t.tensor_type.name == expect_type, t.name
        assert tuple(int(d) for d in t.shape) == tuple(ours.shape)[::-1]
        assert np.array_equal(np.asarray(t.data).reshape(-1).view(np.uint8), tensor_bytes(ours)), t.name


def test_a_big_vocabulary_reads_back(tmp_path):
    "262,144 strings of every length 1..12 (Gemma 3's vocabulary size) through the string loop, exactly."
    vocab = [f"tok{i}"[: 1 + i % 12] for i in range(262_144)]
    with GGUFFile(GGUFWriter(tmp_path / "v.gguf").add("tokenizer.ggml.tokens", vocab).write()) as f:
        assert f.metadata["tokenizer.ggml.tokens"] == vocab
        assert f.metadata_types["tokenizer.ggml.tokens"] == (VT.ARRAY, VT.STRING)


def test_real_models_copy_byte_for_byte(real_model_path, tmp_path):
    "Copying every key (with its type) and tensor of a real model reproduces the file exactly."
    f = GGUFFile(real_model_path)
    w = GGUFWriter(tmp_path / "copy.gguf")
    for k, v in f.metadata.items(): w.add(k, v, f.metadata_types[k])
    for name in f.tensors: w.add_tensor(name, f.qtensor(name))
    assert filecmp.cmp(real_model_path, w.write(), shallow=False)


def test_inferred_types():
    assert infer_value_type(True) == VT.BOOL
    assert infer_value_type(7) == VT.INT32 and infer_value_type(-2**31) == VT.INT32
    assert infer_value_type(2**31) == VT.INT64 and infer_value_type(2**63) == VT.UINT64
    assert infer_value_type(1.0) == VT.FLOAT32 and infer_value_type("x") == VT.STRING
    assert infer_value_type(np.float64(1)) == VT.FLOAT64 and infer_value_type(np.uint16(3)) == VT.UINT16
    assert infer_value_type([1, 2**40]) == (A, VT.INT64)
    assert infer_value_type([1, 2.5]) == (A, VT.FLOAT32)
    assert infer_value_type([True, False]) == (A, VT.BOOL)
    assert infer_value_type(["a"]) == (A, VT.STRING)
    assert infer_value_type([]) == (A, VT.INT32)
    assert infer_value_type([[1], [2, 3]]) == (A, (A, VT.INT32))
    assert infer_value_type([[1], ["a"]]) == (A, [(A, VT.INT32), (A, VT.STRING)])
    assert infer_value_type(np.arange(3, dtype=np.int16)) == (A, VT.INT16)
    with pytest.raises(ValueError): infer_value_type(2**64)
    with pytest.raises(TypeError): infer_value_type([1, "a"])
    with pytest.raises(TypeError): infer_value_type({"a": 1})


def test_inferred_round_trip(tmp_path):
    values = {"b": True, "i": -5, "big": 2**40, "f": 0.5, "s": "x", "ints": [1, 2, 3], "mix": [1, 0.25],
              "strs": ["a", "b"], "np": np.array([1.5, 2.5]), "nested": [[1, 2], ["q"]]}
    w = GGUFWriter(tmp_path / "inf.gguf")
    for k, v in values.items(): w.add(k, v)
    f = GGUFFile(w.write())
    assert f.metadata == {k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in values.items()}
    assert f.metadata_types["np"] == (A, VT.FLOAT64)


def test_scalar_type_given_for_a_list_means_array_of_it(tmp_path):
    w = GGUFWriter(tmp_path / "x.gguf")
    w.add("scores", [0.5, 1.0], VT.FLOAT32).add("ids", [1, 2], VT.UINT8)
    f = GGUFFile(w.write())
    assert f.metadata_types["scores"] == (A, VT.FLOAT32) and f.metadata_types["ids"] == (A, VT.UINT8)


def test_invalid_utf8_strings_round_trip(tmp_path):
    "A string value that is not UTF-8 loads (surrogate-escaped) and is written back byte for byte."
    raw = b"ok\xff\xfe"
    p = tmp_path / "bad_utf8.gguf"
    key = b"tok"
    p.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + struct.pack("<Q", len(key)) + key
                  + struct.pack("<IQ", VT.STRING, len(raw)) + raw)
    f = GGUFFile(p)
    assert f.metadata["tok"].encode("utf-8", "surrogateescape") == raw
    w = GGUFWriter(tmp_path / "again.gguf")
    w.add("tok", f.metadata["tok"])
    w.write()
    assert (tmp_path / "again.gguf").read_bytes()[:p.stat().st_size] == p.read_bytes()


@pytest.mark.parametrize("key,value,vtype,exc", [
    ("u8", 256, VT.UINT8, ValueError), ("u8", -1, VT.UINT8, ValueError), ("i32", 2**31, VT.INT32, ValueError),
    ("u64", 2**64, VT.UINT64, ValueError), ("u32", 1.5, VT.UINT32, TypeError), ("s", 3, VT.STRING, TypeError),
    ("b", 1, VT.BOOL, TypeError), ("arr", [1, 300], VT.UINT8, ValueError), ("arr", "abc", (A, VT.STRING), TypeError),
    ("f", [1.0], VT.FLOAT32, None), ("x", object(), None, TypeError),
    ("general.alignment", 48, VT.UINT32, ValueError), ("general.alignment", 64, VT.INT32, ValueError),
])
def test_writer_refuses_bad_values(tmp_path, key, value, vtype, exc):
    w = GGUFWriter(tmp_path / "x.gguf")
    if exc is None:
        w.add(key, value, vtype)
        return
    with pytest.raises(exc):
        w.add(key, value, vtype)


def test_writer_refuses_duplicates_and_bad_tensors(tmp_path):
    w = GGUFWriter(tmp_path / "x.gguf")
    w.add("a", 1)
    with pytest.raises(ValueError, match="already"): w.add("a", 2)
    w.add_tensor("t", np.zeros(4, np.float32))
    with pytest.raises(ValueError, match="already"): w.add_tensor("t", np.zeros(4, np.float32))
    with pytest.raises(TypeError): w.add_tensor("u", np.zeros(4, np.uint32))
    with pytest.raises(ValueError): w.add_tensor("five_dims", np.zeros((1, 1, 1, 1, 2), np.float32))
    with pytest.raises(TypeError): w.add_tensor("list", [1.0, 2.0])
    with pytest.raises(ValueError, match="llama.cpp"): w.add_tensor("x" * 64, np.zeros(4, np.float32))
    w.add_tensor("x" * 63, np.zeros(4, np.float32))
    with pytest.raises(ValueError): GGUFWriter(tmp_path / "y.gguf", alignment=3)


class FailingTensor(QTensor):
    "A tensor whose bytes cannot be read once `armed`: a disk error in the middle of write()."
    armed = False
    @property
    def data(self):
        if self.armed: raise OSError("simulated read error")
        return self._d
    @data.setter
    def data(self, v): self._d = v
    @property
    def nbytes(self): return self._d.size


def test_failed_write_leaves_no_file(tmp_path):
    w = GGUFWriter(tmp_path / "x.gguf")
    w.add_tensor("ok", np.zeros(4, np.float32))
    bad = FailingTensor(np.zeros(16, np.uint8), GGMLType.F32, (4,))
    w.add_tensor("bad", bad)
    bad.armed = True
    with pytest.raises(OSError, match="simulated"): w.write()
    assert list(tmp_path.iterdir()) == []


def test_mmap_views_survive_close(tmp_path):
    w = GGUFWriter(tmp_path / "x.gguf")
    w.add_tensor("t", np.arange(8, dtype=np.float32))
    f = GGUFFile(w.write())
    q = f.qtensor("t")
    f.close()
    assert q.data.view(np.float32).tolist() == list(range(8))
    with pytest.raises(ValueError, match="closed"): f.qtensor("t")


def test_dequantize_is_gguffile_own_method_and_imports_stay_in_reading_order(tmp_path):
    "`GGUFFile.dequantize` is defined in chapter 02's module; chapter 03's code is imported only when it runs."
    import ast, inspect, llmbook.gguf, llmbook.quants
    assert GGUFFile.dequantize.__module__ == "llmbook.gguf"
    tree = ast.parse(inspect.getsource(llmbook.gguf))
    top = {n.module for n in tree.body if isinstance(n, ast.ImportFrom) and n.module}
    top |= {a.name for n in tree.body if isinstance(n, ast.Import) for a in n.names}
    assert not {m for m in top if m.lstrip(".").split(".")[-1] == "quants" or m.startswith("llmbook.quants")}, top
    x = np.random.default_rng(0).standard_normal((3, 64)).astype(np.float32)
    path = GGUFWriter(tmp_path / "q.gguf").add_tensor("q", llmbook.quants.quantize(x, "Q8_0")).add_tensor("f", x).write()
    with GGUFFile(path) as f:
        np.testing.assert_array_equal(f.dequantize("f"), x)
        np.testing.assert_array_equal(f.dequantize("q"), llmbook.quants.dequantize(f.qtensor("q")))
