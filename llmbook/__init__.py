__version__ = "0.1.0"
# The public API (../shared/DESIGN.md, "Public contract"): the names checks outside the repo rely on.
# Written by hand (nbdev only updates the version line): each name comes from the chapter that builds it, in the
# book's reading order. Part I builds the engine, Part II makes it fast (nothing public of its own: `load` uses it),
# Part III meets every other model, Part IV uses it; `load` (chapter 23) is the one place that assembles them.
from .tensors import GGMLType, QTensor
from .gguf import GGUFFile, GGUFError, GGUFWriter
from .quants import dequantize, quantize
from .model import Model, ModelConfig
from .tokenizer import Tokenizer, TokenizerError, StreamDecoder
from .sampling import Sampler, SamplerSettings
from .generate import LLM, Session, Completion, TokenStep, Stream
from .chat import ChatTemplateError, render_chat      # chapter 18: LLM.chat and Session.chat come with it
from .quantize import quantize_model, quantize_plan, measure, file_type
from .loading import load

# Serving, Hugging Face checkpoints and grammars are parts that `import llmbook` does not load (a generation without
# a grammar never needs chapter 24): their names are imported the first time they are used (PEP 562). `llmbook.load`
# imports the converter itself when it is given a checkpoint directory or a hub name.
_LAZY = {"convert": "hf", "export_hf": "hf", "make_app": "serve", "Grammar": "grammar", "GrammarError": "grammar",
         "as_grammar": "grammar", "json_schema_to_grammar": "grammar"}

def __getattr__(name):
    import importlib
    if name in ("hf", "serve", "grammar"): return importlib.import_module(f".{name}", __name__)   # llmbook.hf, as before
    if name in _LAZY:
        value = getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

def __dir__(): return sorted(list(globals()) + list(_LAZY))
