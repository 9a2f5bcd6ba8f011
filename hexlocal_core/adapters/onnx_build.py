"""Build a BERT ONNX graph from safetensors weights, without torch.

Two heads share one encoder:

- `Head.ENCODER`: outputs `last_hidden_state` (batch, seq, hidden); the embedder mean-pools it.
- `Head.CLASSIFIER`: a cross-encoder; CLS -> pooler dense + tanh -> classifier -> `logits`
  (batch, num_labels).

Inputs are `input_ids`, `attention_mask`, `token_type_ids` (int64, dynamic batch and
sequence). The graph computes what Hugging Face's `BertModel` computes (exact erf GELU,
LayerNormalization, attention masked by `attention_mask`), so it agrees with
sentence-transformers to about 1e-6. The encoder is written in onnxruntime's fused
transformer ops (`com.microsoft` Attention with one packed QKV projection,
SkipLayerNormalization, BiasGelu): onnxruntime's own graph optimiser fuses only the GELU of
the plain-op graph. fp32 runs at the same speed either way; the int8 copy quantises the
fused Attention too and embeds 1.1-1.2x faster than int8 of the plain-op graph
(docs/lab/embedder.md). Built graphs are cached under a name keyed by the weights, the config
and the builder version, written atomically, and verified with onnxruntime before use.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
from collections.abc import Callable
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
from attrs import frozen

from hexlocal_core.adapters.root_logger import root_logger_untouched
from hexlocal_core.errors import ModelError

if TYPE_CHECKING:
    import onnx

log = logging.getLogger("hexlocal.adapters.onnx_build")

# Bump whenever the emitted graph changes: cached files carry it in their key.
BUILDER_VERSION = 2  # 2: fused Attention / SkipLayerNormalization / BiasGelu
# 17 is the first opset with LayerNormalization; IR 8 is what opset 17 shipped with.
OPSET = 17
IR_VERSION = 8
MS_DOMAIN = "com.microsoft"  # onnxruntime's contrib ops (version 1)

Array = npt.NDArray[Any]


class Head(StrEnum):
    ENCODER = "encoder"
    CLASSIFIER = "classifier"


@frozen
class BertConfig:
    """The parts of a Hugging Face `config.json` the graph depends on."""

    hidden_size: int
    num_layers: int
    num_heads: int
    intermediate_size: int
    layer_norm_eps: float
    vocab_size: int
    max_position_embeddings: int
    type_vocab_size: int
    num_labels: int = 1

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_heads

    @classmethod
    def from_file(cls, path: Path) -> BertConfig:
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ModelError(f"cannot read the model config {path}: {exc}") from exc
        return cls.from_dict(raw, origin=str(path))

    @classmethod
    def from_dict(cls, raw: dict[str, Any], *, origin: str = "config.json") -> BertConfig:
        _check_supported(raw, origin)
        try:
            config = cls(
                hidden_size=int(raw["hidden_size"]),
                num_layers=int(raw["num_hidden_layers"]),
                num_heads=int(raw["num_attention_heads"]),
                intermediate_size=int(raw["intermediate_size"]),
                layer_norm_eps=float(raw.get("layer_norm_eps", 1e-12)),
                vocab_size=int(raw["vocab_size"]),
                max_position_embeddings=int(raw["max_position_embeddings"]),
                type_vocab_size=int(raw.get("type_vocab_size", 2)),
                num_labels=_num_labels(raw),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ModelError(f"{origin} is not a BERT config (missing or bad {exc})") from exc
        if config.hidden_size % config.num_heads:
            raise ModelError(f"{origin}: hidden_size is not a multiple of num_attention_heads")
        return config


def _check_supported(raw: dict[str, Any], origin: str) -> None:
    # Anything else would build a graph that silently disagrees with the trained model.
    if raw.get("model_type", "bert") != "bert":
        raise ModelError(f"{origin}: model_type {raw.get('model_type')!r} is not BERT")
    if raw.get("hidden_act", "gelu") != "gelu":
        raise ModelError(f"{origin}: hidden_act {raw.get('hidden_act')!r} is not supported")
    if raw.get("position_embedding_type", "absolute") != "absolute":
        raise ModelError(f"{origin}: only absolute position embeddings are supported")


def _num_labels(raw: dict[str, Any]) -> int:
    if "num_labels" in raw:
        return int(raw["num_labels"])
    return len(raw.get("id2label") or {0: "LABEL_0"})


# --- the cache --------------------------------------------------------------------------


def graph_key(weights: Path, config: Path, head: Head) -> str:
    """Hash of everything the graph is made of, so a stale graph is never reused."""
    digest = hashlib.sha256()
    digest.update(f"builder={BUILDER_VERSION};opset={OPSET};head={head.value};".encode())
    digest.update(config.read_bytes())
    with weights.open("rb") as fh:
        digest.update(hashlib.file_digest(fh, "sha256").digest())
    return digest.hexdigest()[:24]


def cached_graph_path(weights: Path, config: Path, head: Head, cache_dir: Path) -> Path:
    return cache_dir / f"bert-{head.value}-{graph_key(weights, config, head)}.onnx"


def ensure_graph(weights: Path, config: Path, head: Head, cache_dir: Path) -> Path:
    """The cached ONNX graph for these weights, building (and verifying) it when absent."""
    target = cached_graph_path(weights, config, head, cache_dir)
    if target.is_file():
        return target
    log.info("building the %s ONNX graph from %s into %s", head.value, weights, target)
    bert = BertConfig.from_file(config)
    model = build_model(load_weights(weights), bert, head)
    write_verified(model, target, bert, head)
    return target


def write_verified(model: onnx.ModelProto, target: Path, bert: BertConfig, head: Head) -> None:
    """Save to a temporary file, verify it there, then rename: readers never see half a file."""
    import onnx

    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(dir=target.parent, prefix=".build-", suffix=".onnx")
    except OSError as exc:
        raise ModelError(f"cannot write to the model cache {target.parent}: {exc}") from exc
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        onnx.save_model(model, str(tmp))
        verify_graph(tmp, bert, head)
        tmp.chmod(0o644)  # mkstemp makes files private; a model cache is not secret
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)


def verify_graph(path: Path, bert: BertConfig, head: Head) -> None:
    """Run the graph once on a known input; shape and finiteness must be right."""
    import onnxruntime as ort

    ids = np.array([[101, 7592, 2088, 102], [101, 7592, 102, 0]], dtype=np.int64)
    mask = (ids != 0).astype(np.int64)
    feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
    try:
        session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        (out,) = session.run(None, feeds)
    except Exception as exc:  # onnxruntime raises its own untyped errors
        raise ModelError(f"the built ONNX graph does not run: {exc}") from exc
    expected = (2, 4, bert.hidden_size) if head is Head.ENCODER else (2, bert.num_labels)
    if tuple(out.shape) != expected or not np.isfinite(out).all():
        raise ModelError(
            f"the built ONNX graph gave shape {tuple(out.shape)} (expected {expected}) "
            f"or non-finite values; delete the model cache and report a bug"
        )


# --- weights ----------------------------------------------------------------------------


def load_weights(path: Path) -> dict[str, Array]:
    """Tensors by their BertModel name, whatever prefix or legacy naming the file uses."""
    from safetensors.numpy import load_file

    try:
        raw = load_file(str(path))
    except Exception as exc:  # safetensors raises SafetensorError and OSError variants
        raise ModelError(f"cannot read the weights {path}: {exc}") from exc
    return _normalise_names(raw)


def _normalise_names(raw: dict[str, Array]) -> dict[str, Array]:
    out: dict[str, Array] = {}
    for name, tensor in raw.items():
        # BertForSequenceClassification nests the encoder under "bert."; old TF-converted
        # checkpoints call LayerNorm parameters gamma/beta.
        key = name.removeprefix("bert.")
        key = key.replace("LayerNorm.gamma", "LayerNorm.weight")
        key = key.replace("LayerNorm.beta", "LayerNorm.bias")
        out[key] = tensor
    return out


def _take(weights: dict[str, Array], name: str) -> Array:
    try:
        return np.ascontiguousarray(weights[name], dtype=np.float32)
    except KeyError:
        raise ModelError(f"the weights have no tensor {name!r}; is this a BERT model?") from None


# --- the graph --------------------------------------------------------------------------


class _Graph:
    """Collects nodes and initializers with unique names; each op returns its output name."""

    def __init__(self) -> None:
        self.nodes: list[Any] = []
        self.initializers: list[Any] = []
        self._count = 0

    def _name(self, hint: str) -> str:
        self._count += 1
        return f"{hint}_{self._count}"

    def const(self, hint: str, value: Array) -> str:
        from onnx import numpy_helper

        name = self._name(hint)
        self.initializers.append(numpy_helper.from_array(value, name))
        return name

    def op(self, op_type: str, *inputs: str, out: str | None = None, **attrs: Any) -> str:
        return self._node("", op_type, inputs, out, attrs)

    def ms_op(self, op_type: str, *inputs: str, **attrs: Any) -> str:
        """An onnxruntime contrib op (`com.microsoft`)."""
        return self._node(MS_DOMAIN, op_type, inputs, None, attrs)

    def _node(
        self,
        domain: str,
        op_type: str,
        inputs: tuple[str, ...],
        out: str | None,
        attrs: dict[str, Any],
    ) -> str:
        from onnx import helper

        output = out or self._name(op_type.lower())
        # Node named after its output: quantisation selects nodes by these names.
        self.nodes.append(
            helper.make_node(op_type, list(inputs), [output], name=output, domain=domain, **attrs)
        )
        return output

    def linear(self, x: str, weights: dict[str, Array], prefix: str) -> str:
        return self.op("Add", self.matmul(x, weights, prefix), self.bias(weights, prefix))

    def matmul(self, x: str, weights: dict[str, Array], prefix: str) -> str:
        """A Linear layer without its bias (the fused op after it adds the bias)."""
        # torch Linear stores (out, in); MatMul wants (in, out).
        w = self.const(f"{prefix}.weight", _take(weights, f"{prefix}.weight").T.copy())
        return self.op("MatMul", x, w, out=self._name(f"{prefix}.matmul"))

    def bias(self, weights: dict[str, Array], prefix: str) -> str:
        return self.const(f"{prefix}.bias", _take(weights, f"{prefix}.bias"))

    def layer_norm(self, x: str, weights: dict[str, Array], prefix: str, eps: float) -> str:
        scale = self.const(f"{prefix}.weight", _take(weights, f"{prefix}.weight"))
        return self.op(
            "LayerNormalization", x, scale, self.bias(weights, prefix), axis=-1, epsilon=eps
        )

    def dense_residual_norm(
        self, x: str, skip: str, weights: dict[str, Array], dense: str, norm: str, eps: float
    ) -> str:
        """LayerNorm(x W + b + skip): the Linear layer `dense`, its residual connection and
        the norm `norm`; bias, residual and norm are one SkipLayerNormalization."""
        projected = self.matmul(x, weights, dense)
        bias = self.bias(weights, dense)
        scale = self.const(f"{norm}.weight", _take(weights, f"{norm}.weight"))
        shift = self.bias(weights, norm)
        return self.ms_op(
            "SkipLayerNormalization", projected, skip, scale, shift, bias, epsilon=eps
        )

    def i64(self, hint: str, values: list[int]) -> str:
        return self.const(hint, np.array(values, dtype=np.int64))

    def f32(self, hint: str, value: float) -> str:
        return self.const(hint, np.array(value, dtype=np.float32))


def build_model(weights: dict[str, Array], bert: BertConfig, head: Head) -> onnx.ModelProto:
    """The whole ONNX model for one head."""
    from onnx import TensorProto, checker, helper

    g = _Graph()
    hidden = _embeddings(g, weights, bert)
    # Attention's raw mask: int32 (batch, seq), 1 attended, 0 padding.
    mask = g.op("Cast", "attention_mask", to=6)  # 6 = INT32
    for layer in range(bert.num_layers):
        hidden = _encoder_layer(g, weights, bert, hidden, mask, f"encoder.layer.{layer}")
    if head is Head.ENCODER:
        g.op("Identity", hidden, out="last_hidden_state")
        output = helper.make_tensor_value_info(
            "last_hidden_state", TensorProto.FLOAT, ["batch", "sequence", bert.hidden_size]
        )
    else:
        _classifier(g, weights, hidden)
        output = helper.make_tensor_value_info(
            "logits", TensorProto.FLOAT, ["batch", bert.num_labels]
        )
    inputs = [
        helper.make_tensor_value_info(name, TensorProto.INT64, ["batch", "sequence"])
        for name in ("input_ids", "attention_mask", "token_type_ids")
    ]
    graph = helper.make_graph(g.nodes, f"bert_{head.value}", inputs, [output], g.initializers)
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", OPSET), helper.make_opsetid(MS_DOMAIN, 1)],
        producer_name="hexlocal",
        producer_version=str(BUILDER_VERSION),
    )
    model.ir_version = IR_VERSION
    checker.check_model(model)
    return model


def _embeddings(g: _Graph, weights: dict[str, Array], bert: BertConfig) -> str:
    words = g.const("word_embeddings", _take(weights, "embeddings.word_embeddings.weight"))
    positions = g.const(
        "position_embeddings", _take(weights, "embeddings.position_embeddings.weight")
    )
    types = g.const(
        "token_type_embeddings", _take(weights, "embeddings.token_type_embeddings.weight")
    )
    # Position ids are 0..seq-1, computed from the input's shape so any length works.
    seq_len = g.op("Gather", g.op("Shape", "input_ids"), g.const("one", np.array(1, np.int64)))
    zero, step = g.const("zero", np.array(0, np.int64)), g.const("step", np.array(1, np.int64))
    position_ids = g.op("Range", zero, seq_len, step)
    summed = g.op(
        "Add",
        g.op("Add", g.op("Gather", words, "input_ids"), g.op("Gather", types, "token_type_ids")),
        g.op("Gather", positions, position_ids),
    )
    return g.layer_norm(summed, weights, "embeddings.LayerNorm", bert.layer_norm_eps)


def _encoder_layer(
    g: _Graph, weights: dict[str, Array], bert: BertConfig, x: str, mask: str, prefix: str
) -> str:
    eps = bert.layer_norm_eps
    attended = _self_attention(g, weights, bert, x, mask, f"{prefix}.attention.self")
    output = f"{prefix}.attention.output"
    x = g.dense_residual_norm(attended, x, weights, f"{output}.dense", f"{output}.LayerNorm", eps)
    intermediate = f"{prefix}.intermediate.dense"
    # Exact erf GELU of (x W + b), as BertModel's "gelu".
    inner = g.ms_op("BiasGelu", g.matmul(x, weights, intermediate), g.bias(weights, intermediate))
    return g.dense_residual_norm(
        inner, x, weights, f"{prefix}.output.dense", f"{prefix}.output.LayerNorm", eps
    )


def _self_attention(
    g: _Graph, weights: dict[str, Array], bert: BertConfig, x: str, mask: str, prefix: str
) -> str:
    """Multi-head self-attention, scaled by 1/sqrt(head_dim), from one (hidden, 3*hidden)
    projection: query, key and value side by side, as Attention wants them."""
    parts = ("query", "key", "value")
    qkv_weight = np.concatenate(
        [_take(weights, f"{prefix}.{p}.weight").T for p in parts], axis=1
    ).copy()
    qkv_bias = np.concatenate([_take(weights, f"{prefix}.{p}.bias") for p in parts])
    return g.ms_op(
        "Attention",
        x,
        g.const(f"{prefix}.qkv.weight", qkv_weight),
        g.const(f"{prefix}.qkv.bias", qkv_bias),
        mask,
        num_heads=bert.num_heads,
    )


def _classifier(g: _Graph, weights: dict[str, Array], hidden: str) -> str:
    cls = g.op("Gather", hidden, g.const("cls_index", np.array(0, np.int64)), axis=1)
    pooled = g.op("Tanh", g.linear(cls, weights, "pooler.dense"))
    return g.op("Identity", g.linear(pooled, weights, "classifier"), out="logits")


# --- int8 dynamic quantisation ----------------------------------------------------------

QUANTIZE_VERSION = 1
# check(fp32_graph, int8_graph) -> agreement in [0, 1] (e.g. a rank correlation on probes)
AgreementCheck = Callable[[Path, Path], float]


def ensure_quantized(graph: Path, cache_dir: Path, check: AgreementCheck) -> tuple[Path, float]:
    """An int8 copy of `graph` and how well it agrees with fp32 (`check`'s verdict).

    Both are cached (the graph, and its agreement in a `.agreement` file beside it), so
    the quantisation and the check, which cost seconds, run once per graph; the caller
    decides whether the agreement is good enough.
    """
    digest = hashlib.sha256()
    digest.update(f"quantize={QUANTIZE_VERSION};".encode())
    with graph.open("rb") as fh:
        digest.update(hashlib.file_digest(fh, "sha256").digest())
    target = cache_dir / f"{graph.stem}-{digest.hexdigest()[:16]}.int8.onnx"
    verdict = target.with_suffix(".agreement")
    if target.is_file() and verdict.is_file():
        try:
            return target, float(verdict.read_text(encoding="utf-8"))
        except ValueError:
            pass  # a damaged verdict: measure again
    return target, _quantize(graph, target, verdict, check)


def _quantize(graph: Path, target: Path, verdict: Path, check: AgreementCheck) -> float:
    from onnx import TensorProto
    from onnxruntime.quantization import QuantType, quantize_dynamic

    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(dir=target.parent, prefix=".quant-", suffix=".onnx")
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        # Per-channel weight scales: per-tensor scales lost far more (embedding cosine 0.90
        # against 0.98 per-channel on the reference sentences).
        with root_logger_untouched():
            quantize_dynamic(
                graph,
                tmp,
                weight_type=QuantType.QInt8,
                per_channel=True,
                # ONNX shape inference does not know the contrib ops' output types.
                extra_options={"DefaultTensorType": TensorProto.FLOAT},
            )
        agreement = float(check(graph, tmp))
        tmp.chmod(0o644)
        os.replace(tmp, target)
        _write_atomically(verdict, f"{agreement!r}\n")
        log.info("int8 %s agrees with fp32 at %.4f", graph.name, agreement)
        return agreement
    finally:
        tmp.unlink(missing_ok=True)


def _write_atomically(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
