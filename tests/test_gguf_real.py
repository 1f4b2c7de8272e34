"""llmbook's GGUF reader against gguf-py's GGUFReader on the real models: every key, value, tensor."""
import time
import numpy as np
import pytest
import gguf
from llmbook.gguf import GGUFFile, GGUFValueType, TensorNotFound
from llmbook.untrusted import summary
from llmbook.tensors import GGMLType


@pytest.fixture(scope="module")
def pair(real_model_path):
    return GGUFFile(real_model_path), gguf.GGUFReader(real_model_path)


def test_header(pair):
    ours, ref = pair
    assert ours.version == int(ref.fields["GGUF.version"].parts[0][0])
    assert ours.alignment == ref.alignment
    assert ours.data_offset == ref.data_offset
    assert len(ours.tensors) == int(ref.fields["GGUF.tensor_count"].parts[0][0]) == len(ref.tensors)
    assert len(ours.metadata) == int(ref.fields["GGUF.kv_count"].parts[0][0])


def test_metadata_values_and_types(pair):
    ours, ref = pair
    keys = [k for k in ref.fields if not k.startswith("GGUF.")]
    assert list(ours.metadata) == keys                  # same keys, same order
    for k in keys:
        field = ref.fields[k]
        assert ours.metadata[k] == field.contents(), k
        # plain Python types, as the public contract says
        v = ours.metadata[k]
        assert type(v) in (int, float, bool, str, list), (k, type(v))
        spec = ours.metadata_types[k]
        if field.types[0] == gguf.GGUFValueType.ARRAY:
            assert spec == (GGUFValueType.ARRAY, GGUFValueType(int(field.types[1]))), k
            assert all(type(x) in (int, float, bool, str) for x in v), k
        else:
            assert spec == GGUFValueType(int(field.types[0])), k


def test_tensor_infos(pair):
    ours, ref = pair
    assert list(ours.tensors) == [t.name for t in ref.tensors]
    for t in ref.tensors:
        info = ours.tensors[t.name]
        assert info.type == t.tensor_type.name, t.name
        assert info.ggml_type == GGMLType(int(t.tensor_type))
        assert info.dims == tuple(int(d) for d in t.shape), t.name
        assert info.shape == info.dims[::-1]
        assert info.offset == t.data_offset, t.name     # both absolute
        assert info.n_bytes == t.n_bytes, t.name


def test_qtensor_views_match_gguf_py_bytes(pair):
    ours, ref = pair
    for t in ref.tensors[:40]:
        q = ours.qtensor(t.name)
        assert q.type.name == t.tensor_type.name and q.shape == ours.tensors[t.name].shape
        assert np.array_equal(q.data, np.asarray(t.data).reshape(-1).view(np.uint8)), t.name
        assert not q.data.flags.writeable                # read-only map: weights cannot be scribbled on


def test_missing_tensor_names_close_matches(pair):
    ours, _ = pair
    name = next(iter(ours.tensors))
    with pytest.raises(KeyError) as e:
        ours.qtensor(name + "x")
    assert isinstance(e.value, TensorNotFound) and name in str(e.value)


def test_open_is_fast(real_model_path):
    "Gemma 3's 262,144-token vocabulary (tokens, scores, types) must parse well under a second."
    best = min(_time_open(real_model_path) for _ in range(3))
    assert best < 0.5, f"opening took {best:.3f} s"


def _time_open(p):
    t0 = time.process_time()           # CPU time: a busy machine does not make it fail
    GGUFFile(p).close()
    return time.process_time() - t0


def test_summary_mentions_everything(pair):
    ours, _ = pair
    s = summary(ours)
    assert f"architecture: {ours.arch}" in s and f"GGUF version: {ours.version}" in s
    n_vocab = len(ours.metadata["tokenizer.ggml.tokens"])
    assert f"[{n_vocab} items: " in s
    for name in ours.tensors: assert name in s

