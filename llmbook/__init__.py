__version__ = "0.1.0"
# The public API (../shared/DESIGN.md, "Public contract"): the names checks outside the repo rely on.
# Written by hand (nbdev only updates the version line): each name comes from the chapter that builds it.
from .tensors import GGMLType, QTensor
from .gguf import GGUFFile, GGUFError, GGUFWriter
from .quants import dequantize, quantize
from .model import Model, ModelConfig
from .tokenizer import Tokenizer, TokenizerError, StreamDecoder
from .sampling import Sampler, SamplerSettings
from .grammar import Grammar, GrammarError, json_schema_to_grammar
from .generate import load, LLM, Session, Completion, ChatTemplateError, render_chat, TokenStep, Stream
from .quantize import quantize_model, quantize_plan, measure, file_type

# Chapters 13 (serving) and 14 (Hugging Face checkpoints) are optional parts that `import llmbook` does not load:
# their names are imported the first time they are used (PEP 562). `llmbook.load` imports chapter 14 itself when it
# is given a checkpoint directory or a hub name.
_LAZY = {"convert": "hf", "export_hf": "hf", "make_app": "serve"}

def __getattr__(name):
    import importlib
    if name in ("hf", "serve"): return importlib.import_module(f".{name}", __name__)   # llmbook.hf, as before
    if name in _LAZY:
        value = getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

def __dir__(): return sorted(list(globals()) + list(_LAZY))
