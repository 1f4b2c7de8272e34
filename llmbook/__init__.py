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
from .hf import convert, export_hf   # also lets llmbook.load open checkpoint directories and hub names (chapter 14)
from .serve import make_app   # `llmbook serve` (chapter 13); FastAPI and uvicorn are imported only when serving
