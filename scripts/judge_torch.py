"""The judge's model in PyTorch, for training only: a BERT cross-encoder
(BertForSequenceClassification's layout: CLS -> pooler dense + tanh -> one logit).

The product never imports this (it runs the ONNX graph `onnx_build` makes of the exported
weights); module and parameter names follow Hugging Face's, so the exported state dict is
the checkpoint `onnx_build.Head.CLASSIFIER` reads. Torch is a training dependency only.
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path
from typing import Any

import torch
from torch import nn


class _Embeddings(nn.Module):
    def __init__(self, c: dict[str, Any]) -> None:
        super().__init__()
        h = c["hidden_size"]
        self.word_embeddings = nn.Embedding(c["vocab_size"], h)
        self.position_embeddings = nn.Embedding(c["max_position_embeddings"], h)
        self.token_type_embeddings = nn.Embedding(c["type_vocab_size"], h)
        self.LayerNorm = nn.LayerNorm(h, eps=c["layer_norm_eps"])

    def forward(self, ids: torch.Tensor, types: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(ids.shape[1], device=ids.device).unsqueeze(0)
        x = self.word_embeddings(ids) + self.position_embeddings(positions)
        return self.LayerNorm(x + self.token_type_embeddings(types))


class _Dense(nn.Module):
    """`dense` then, when given, the residual and `LayerNorm` (HF's *Output blocks)."""

    def __init__(self, n_in: int, n_out: int, eps: float | None = None) -> None:
        super().__init__()
        self.dense = nn.Linear(n_in, n_out)
        self.LayerNorm = nn.LayerNorm(n_out, eps=eps) if eps is not None else None

    def forward(self, x: torch.Tensor, residual: torch.Tensor | None = None) -> torch.Tensor:
        y = self.dense(x)
        if self.LayerNorm is not None and residual is not None:
            y = self.LayerNorm(y + residual)
        return y


class _SelfAttention(nn.Module):
    def __init__(self, h: int, heads: int) -> None:
        super().__init__()
        self.query, self.key, self.value = nn.Linear(h, h), nn.Linear(h, h), nn.Linear(h, h)
        self.heads = heads

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        b, t, h = x.shape
        d = h // self.heads

        def split(y: torch.Tensor) -> torch.Tensor:
            return y.view(b, t, self.heads, d).transpose(1, 2)

        scores = split(self.query(x)) @ split(self.key(x)).transpose(-1, -2) / math.sqrt(d)
        weights = torch.softmax(scores + mask, dim=-1)
        return (weights @ split(self.value(x))).transpose(1, 2).reshape(b, t, h)


class _Attention(nn.Module):
    def __init__(self, h: int, heads: int, eps: float) -> None:
        super().__init__()
        self.self = _SelfAttention(h, heads)
        self.output = _Dense(h, h, eps)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return self.output(self.self(x, mask), x)


class _Layer(nn.Module):
    def __init__(self, c: dict[str, Any]) -> None:
        super().__init__()
        h, eps = c["hidden_size"], c["layer_norm_eps"]
        self.attention = _Attention(h, c["num_attention_heads"], eps)
        self.intermediate = _Dense(h, c["intermediate_size"])
        self.output = _Dense(c["intermediate_size"], h, eps)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        a = self.attention(x, mask)
        # erf GELU, as BERT and onnx_build's graph use
        return self.output(nn.functional.gelu(self.intermediate(a)), a)


class _Encoder(nn.Module):
    def __init__(self, c: dict[str, Any]) -> None:
        super().__init__()
        self.layer = nn.ModuleList(_Layer(c) for _ in range(c["num_hidden_layers"]))


class _Bert(nn.Module):
    def __init__(self, c: dict[str, Any]) -> None:
        super().__init__()
        self.embeddings = _Embeddings(c)
        self.encoder = _Encoder(c)
        self.pooler = _Dense(c["hidden_size"], c["hidden_size"])


class CrossEncoder(nn.Module):
    """One logit per (query, passage) pair."""

    def __init__(self, config: dict[str, Any]) -> None:
        super().__init__()
        self.config = config
        self.bert = _Bert(config)
        self.classifier = nn.Linear(config["hidden_size"], 1)

    def forward(self, ids: torch.Tensor, mask: torch.Tensor, types: torch.Tensor) -> torch.Tensor:
        additive = (1.0 - mask[:, None, None, :].float()) * -10000.0
        x = self.bert.embeddings(ids, types)
        for layer in self.bert.encoder.layer:
            x = layer(x, additive)
        pooled = torch.tanh(self.bert.pooler(x[:, 0]))
        return self.classifier(pooled).squeeze(-1)

    @classmethod
    def from_sentence_model(cls, folder: Path, seed: int) -> CrossEncoder:
        """The encoder's weights from a sentence-transformers folder (MiniLM's), and a new
        pooler and classifier drawn from `seed`."""
        from safetensors.torch import load_file

        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
        torch.manual_seed(seed)
        model = cls(config)
        weights = {
            f"bert.{k}": v
            for k, v in load_file(str(folder / "model.safetensors")).items()
            if k != "embeddings.position_ids"
        }
        missing, unexpected = model.load_state_dict(weights, strict=False)
        new = {"bert.pooler.dense.weight", "bert.pooler.dense.bias", "classifier.weight"}
        new.add("classifier.bias")
        if unexpected or set(missing) - new:
            raise SystemExit(f"unexpected checkpoint layout: {unexpected} {missing}")
        nn.init.normal_(model.bert.pooler.dense.weight, std=0.02)
        nn.init.zeros_(model.bert.pooler.dense.bias)
        nn.init.normal_(model.classifier.weight, std=0.02)
        nn.init.zeros_(model.classifier.bias)
        return model

    def export(self, out: Path, tokenizer: Path) -> None:
        """A BertForSequenceClassification checkpoint: model.safetensors, config.json and
        the tokenizer, the files `onnx_build` turns into the ONNX graph."""
        from safetensors.torch import save_file

        out.mkdir(parents=True, exist_ok=True)
        state = {k: v.detach().contiguous() for k, v in self.state_dict().items()}
        save_file(state, str(out / "model.safetensors"))
        config = dict(self.config)
        config.update(
            architectures=["BertForSequenceClassification"],
            id2label={"0": "LABEL_0"},
            label2id={"LABEL_0": 0},
        )
        (out / "config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
        shutil.copyfile(tokenizer, out / "tokenizer.json")


class LateInteraction(nn.Module):
    """MaxSim over the encoder's L2-normalised token states (the encoder head's graph)."""

    def __init__(self, config: dict[str, Any]) -> None:
        super().__init__()
        self.config = config
        self.bert = _Bert(config)

    def states(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        additive = (1.0 - mask[:, None, None, :].float()) * -10000.0
        x = self.bert.embeddings(ids, torch.zeros_like(ids))
        for layer in self.bert.encoder.layer:
            x = layer(x, additive)
        return x

    @staticmethod
    def maxsim(
        q: torch.Tensor, q_mask: torch.Tensor, p: torch.Tensor, p_mask: torch.Tensor
    ) -> torch.Tensor:
        """Scores of one query (T_q x H) against passages (N x T_p x H), masks 1/0."""
        qn = nn.functional.normalize(q, dim=-1)
        pn = nn.functional.normalize(p, dim=-1)
        sims = torch.einsum("qh,nph->nqp", qn, pn)
        sims = sims.masked_fill(p_mask[:, None, :] == 0, -2.0)
        best = sims.max(dim=-1).values  # N x T_q
        keep = q_mask.float()
        return (best * keep).sum(-1) / keep.sum()

    @classmethod
    def from_sentence_model(cls, folder: Path, seed: int) -> LateInteraction:
        from safetensors.torch import load_file

        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
        torch.manual_seed(seed)
        model = cls(config)
        weights = {
            f"bert.{k}": v
            for k, v in load_file(str(folder / "model.safetensors")).items()
            if k != "embeddings.position_ids"
        }
        missing, unexpected = model.load_state_dict(weights, strict=False)
        if unexpected or set(missing) - {"bert.pooler.dense.weight", "bert.pooler.dense.bias"}:
            raise SystemExit(f"unexpected checkpoint layout: {unexpected} {missing}")
        return model

    def export(self, out: Path, tokenizer: Path) -> None:
        """A BertModel checkpoint (no pooler): the files `onnx_build`'s encoder head reads."""
        from safetensors.torch import save_file

        out.mkdir(parents=True, exist_ok=True)
        state = {
            k.removeprefix("bert."): v.detach().contiguous()
            for k, v in self.state_dict().items()
            if not k.startswith("bert.pooler.")
        }
        save_file(state, str(out / "model.safetensors"))
        config = dict(self.config) | {"architectures": ["BertModel"]}
        (out / "config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
        shutil.copyfile(tokenizer, out / "tokenizer.json")
