"""Text -> unit vectors, offline by default.

Two back ends, one small interface (`Embedder`):

- `local/all-minilm-l6-v2` (the default, 384 dimensions): the bundled
  all-MiniLM-L6-v2 weights run as ONNX on onnxruntime, no torch, no network
  (see `minilm_onnx` for how the ONNX file is made).  ~5 ms per query and
  ~13 chunks of 256 tokens per second on two cores.
- `openai/text-embedding-3-small` (or `-3-large`, `ada-002`) and
  `openai-compatible/<model>` (any server speaking OpenAI's `/embeddings`:
  Ollama, vLLM, LM Studio, llama.cpp), over httpx.  The base URL comes from
  `FLOWFORGE_EMBEDDINGS_BASE_URL` (or `OPENAI_BASE_URL`), the key from
  `OPENAI_API_KEY` (or `FLOWFORGE_EMBEDDINGS_API_KEY` for compatible servers).

Every vector returned is float32 and L2-normalised, so cosine similarity is
a dot product everywhere above this module.  A knowledge base records the
model it was built with; `get_embedder(model)` resolves the model string.
"""

from __future__ import annotations

import abc
import asyncio
import os
import re
import threading
from collections import OrderedDict
from typing import Any

import numpy as np

from flowforge.errors import FlowforgeError, MissingCredentials, ProviderError
from flowforge.model_strings import parse_model
from flowforge.tls import verified_context

__all__ = ["Embedder", "LocalMiniLM", "OpenAIEmbedder", "get_embedder", "DEFAULT_MODEL",
           "normalise_model_name"]

DEFAULT_MODEL = "local/all-minilm-l6-v2"
_ALIASES = {"all-minilm-l6-v2", "local/all-minilm-l6-v2", "sentence-transformers/all-minilm-l6-v2",
            "local/minilm", "minilm"}
_OPENAI_MODELS = {"text-embedding-3-small": (1536, 0.02), "text-embedding-3-large": (3072, 0.13),
                  "text-embedding-ada-002": (1536, 0.10)}     # dimensions, USD per 1M tokens
_CACHE_SIZE = 4096


def normalise_model_name(model: str | None) -> str:
    """The canonical spelling of an embedding model string."""
    name = (model or DEFAULT_MODEL).strip()
    if name.lower() in _ALIASES:
        return DEFAULT_MODEL
    if name in _OPENAI_MODELS:
        return f"openai/{name}"
    return name


class Embedder(abc.ABC):
    """One embedding model. `embed` returns an [n, dimensions] float32 array
    of unit vectors; `cost` says what the last texts cost in USD."""

    model: str
    dimensions: int | None          # None until known (compatible servers report it)
    max_tokens: int = 256

    def __init__(self) -> None:
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    @abc.abstractmethod
    async def _embed_uncached(self, texts: list[str]) -> np.ndarray: ...

    @property
    def name(self) -> str:
        """The model string (callers key stored vectors by it)."""
        return self.model

    def count_tokens(self, text: str) -> int:
        """Tokens in `text` as the model counts them (chunk sizes use this)."""
        return max(1, len(text) // 4)

    def token_spans(self, text: str) -> list[tuple[int, int]]:
        """Character spans of the model's tokens (chunking cuts on these)."""
        return [m.span() for m in re.finditer(r"\w+|[^\w\s]", text)]

    def cost(self, tokens: int) -> float:
        return 0.0

    async def embed(self, texts: list[str]) -> np.ndarray:
        """Unit vectors for `texts`; repeated texts (queries, re-added
        documents) come from a small in-process cache."""
        out: list[np.ndarray | None] = []
        missing: list[str] = []
        with self._lock:
            for text in texts:
                hit = self._cache.get(text)
                if hit is not None:
                    self._cache.move_to_end(text)
                else:
                    missing.append(text)
                out.append(hit)
        if missing:
            unique = list(dict.fromkeys(missing))
            vectors = await self._embed_uncached(unique)
            fresh = dict(zip(unique, vectors))
            with self._lock:
                for text, vector in fresh.items():
                    self._cache[text] = vector
                    if len(self._cache) > _CACHE_SIZE:
                        self._cache.popitem(last=False)
            out = [fresh[t] if v is None else v for t, v in zip(texts, out)]
        if not out:
            return np.zeros((0, self.dimensions or 0), dtype=np.float32)
        return np.vstack(out).astype(np.float32, copy=False)

    async def embed_one(self, text: str) -> np.ndarray:
        return (await self.embed([text]))[0]


def _normalise(matrix: np.ndarray) -> np.ndarray:
    matrix = np.asarray(matrix, dtype=np.float32)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix / np.maximum(norms, 1e-12)


class LocalMiniLM(Embedder):
    """all-MiniLM-L6-v2 on onnxruntime. Loading (~0.2 s) happens on first use."""

    model = DEFAULT_MODEL
    dimensions = 384
    max_tokens = 256
    batch_size = 32

    def __init__(self) -> None:
        super().__init__()
        self._session: Any = None
        self._tokenizer: Any = None
        self._load_lock = threading.Lock()

    def _load(self) -> None:
        with self._load_lock:
            if self._session is not None:
                return
            try:
                import onnxruntime
                import tokenizers
            except ImportError:
                raise FlowforgeError("the local embedding model needs onnxruntime and tokenizers: "
                                     "pip install 'flowforge[knowledge]'") from None
            from flowforge.knowledge import minilm_onnx
            path = minilm_onnx.onnx_path()
            if not path.exists():
                minilm_onnx.build_onnx(path)
            tokenizer = tokenizers.Tokenizer.from_file(str(minilm_onnx.model_dir() / "tokenizer.json"))
            tokenizer.enable_truncation(max_length=minilm_onnx.MAX_TOKENS)
            tokenizer.no_padding()
            options = onnxruntime.SessionOptions()
            options.intra_op_num_threads = min(4, os.cpu_count() or 1)
            # Idle threads sleep instead of spinning: spinning burns a core for a
            # while after each batch, taken from the event loop and from other
            # processes (~10 % of a `kb add`'s CPU measured here, for no speed).
            options.add_session_config_entry("session.intra_op.allow_spinning", "0")
            options.log_severity_level = 3
            self._session = onnxruntime.InferenceSession(str(path), options,
                                                         providers=["CPUExecutionProvider"])
            self._tokenizer = tokenizer

    def _encode(self, texts: list[str]):
        self._load()
        return self._tokenizer.encode_batch(texts, add_special_tokens=True)

    def count_tokens(self, text: str) -> int:
        self._load()
        return len(self._tokenizer.encode(text, add_special_tokens=False).ids)

    def token_spans(self, text: str) -> list[tuple[int, int]]:
        self._load()
        tokenizer = self._tokenizer
        tokenizer.no_truncation()
        try:
            encoding = tokenizer.encode(text, add_special_tokens=False)
        finally:
            tokenizer.enable_truncation(max_length=self.max_tokens)
        return [tuple(span) for span in encoding.offsets]

    def embed_sync(self, texts: list[str]) -> np.ndarray:
        """Batches texts of similar length together (padding is wasted work)."""
        encodings = self._encode(texts)
        order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids))
        result = np.zeros((len(texts), self.dimensions), dtype=np.float32)
        for start in range(0, len(order), self.batch_size):
            batch = order[start:start + self.batch_size]
            width = max(len(encodings[i].ids) for i in batch)
            ids = np.zeros((len(batch), width), dtype=np.int64)
            mask = np.zeros((len(batch), width), dtype=np.int64)
            for row, i in enumerate(batch):
                tokens = encodings[i].ids
                ids[row, :len(tokens)] = tokens
                mask[row, :len(tokens)] = 1
            vectors = self._session.run(None, {"input_ids": ids, "attention_mask": mask})[0]
            result[batch] = _normalise(vectors)
        return result

    async def _embed_uncached(self, texts: list[str]) -> np.ndarray:
        # CPU-bound: off the event loop so other blocks keep running.
        return await asyncio.to_thread(self.embed_sync, texts)


class OpenAIEmbedder(Embedder):
    """OpenAI's embeddings API or any server that speaks it."""

    max_tokens = 8191

    def __init__(self, model: str, *, base_url: str | None = None, api_key: str | None = None,
                 transport: Any = None) -> None:
        super().__init__()
        self.model = model
        parsed = parse_model(model)
        provider, name = parsed.provider, parsed.name
        self.remote_name = name
        self.compatible = provider == "openai-compatible"
        known = _OPENAI_MODELS.get(name)
        self.dimensions = known[0] if known else None
        self._price = known[1] if known and not self.compatible else 0.0
        default_base = None if self.compatible else "https://api.openai.com/v1"
        self.base_url = (base_url or os.environ.get("FLOWFORGE_EMBEDDINGS_BASE_URL")
                         or os.environ.get("OPENAI_BASE_URL") or default_base)
        self.api_key = api_key
        self.transport = transport

    def cost(self, tokens: int) -> float:
        return tokens * self._price / 1_000_000

    def _key(self) -> str | None:
        if self.api_key:
            return self.api_key
        if self.compatible:
            return os.environ.get("FLOWFORGE_EMBEDDINGS_API_KEY") or os.environ.get("OPENAI_API_KEY")
        key = os.environ.get("OPENAI_API_KEY")
        if not key:
            raise MissingCredentials("openai", "OPENAI_API_KEY")
        return key

    async def _embed_uncached(self, texts: list[str]) -> np.ndarray:
        import httpx

        from flowforge.providers import base as provider_base
        if not self.base_url:
            raise FlowforgeError(f"{self.model}: no server address - set "
                                 f"FLOWFORGE_EMBEDDINGS_BASE_URL (e.g. http://127.0.0.1:11434/v1)")
        if self.transport is None and not provider_base.ALLOW_MODEL_REQUESTS:
            raise ProviderError("model requests are disabled (tests)", provider="openai")
        key = self._key()
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        vectors: list[list[float]] = []
        async with httpx.AsyncClient(base_url=self.base_url.rstrip("/") + "/", headers=headers,
                                     transport=self.transport, timeout=60,
                                     verify=verified_context()) as client:
            for start in range(0, len(texts), 256):
                batch = texts[start:start + 256]
                try:
                    response = await client.post("embeddings", json={"model": self.remote_name,
                                                                     "input": batch})
                except httpx.HTTPError as exc:
                    raise ProviderError(f"embeddings request failed: {exc}", provider="openai",
                                        retryable=True) from None
                if response.status_code >= 400:
                    raise ProviderError(f"embeddings request failed: {response.text[:300]}",
                                        provider="openai", status=response.status_code,
                                        retryable=response.status_code in (429, 500, 502, 503))
                data = sorted(response.json()["data"], key=lambda item: item["index"])
                vectors.extend(item["embedding"] for item in data)
        matrix = _normalise(np.array(vectors, dtype=np.float32))
        if self.dimensions is None:
            self.dimensions = int(matrix.shape[1])
        return matrix


_EMBEDDERS: dict[str, Embedder] = {}
_EMBEDDERS_LOCK = threading.Lock()


def get_embedder(model: str | None = None) -> Embedder:
    """The (cached, shared) embedder for a model string."""
    name = normalise_model_name(model)
    with _EMBEDDERS_LOCK:
        found = _EMBEDDERS.get(name)
        if found is None:
            if name == DEFAULT_MODEL:
                found = LocalMiniLM()
            elif name.startswith(("openai/", "openai-compatible/")):
                found = OpenAIEmbedder(name)
            else:
                raise FlowforgeError(f"unknown embedding model '{model}': use {DEFAULT_MODEL} "
                                     f"(offline), openai/text-embedding-3-small or "
                                     f"openai-compatible/<model>")
            _EMBEDDERS[name] = found
        return found
