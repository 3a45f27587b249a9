"""The networks the benchmark trains: builders, synthetic batches and the loss, keyed by the catalog.

What the harness knows about a model without building it (names, input shapes, FLOPs per sample,
channels_last) is in harness/catalog.py, which stays torch-free; this module adds what needs torch.
Every network is built with random weights: nothing is downloaded.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Callable

import torch
import torchvision.models
from torch import nn
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

from harness.catalog import MODELS as CATALOG
from harness.catalog import ModelInfo, model_info


@dataclass(frozen=True, kw_only=True, slots=True)
class ModelSpec(ModelInfo):
    """A catalog entry that can build its network and feed it."""

    build: Callable[[], nn.Module]

    def synthetic_batch(self, batch_size: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        """One batch of random inputs and targets, made on ``device`` once and reused every step."""
        generator = torch.Generator(device="cpu").manual_seed(1234)
        if self.input_kind == "image":
            assert self.image_size_px is not None and self.num_classes is not None
            images = torch.randn(batch_size, 3, self.image_size_px, self.image_size_px, generator=generator)
            labels = torch.randint(0, self.num_classes, (batch_size,), generator=generator)
            images = images.to(device)
            if self.channels_last:
                images = images.contiguous(memory_format=torch.channels_last)
            return images, labels.to(device)
        assert self.seq_len is not None and self.vocab_size is not None
        tokens = torch.randint(0, self.vocab_size, (batch_size, self.seq_len), generator=generator)
        targets = torch.randint(0, self.vocab_size, (batch_size, self.seq_len), generator=generator)
        return tokens.to(device), targets.to(device)

    def loss(self, output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        if self.input_kind == "image":
            return nn.functional.cross_entropy(output, target)
        return nn.functional.cross_entropy(output.reshape(-1, output.shape[-1]), target.reshape(-1))


class MaskedLanguageModel(nn.Module):
    """A BERT-style encoder with a masked-LM head, from torch.nn only (no download, no tokenizer).

    Post-norm encoder layers with GELU as in BERT; the decoder shares the word-embedding matrix,
    which is what makes 6 × parameters × tokens the right FLOP count for it.
    """

    def __init__(self, *, layers: int, hidden: int, heads: int, ffn: int, vocab_size: int, max_positions: int):
        super().__init__()
        self.word_embeddings = nn.Embedding(vocab_size, hidden)
        self.position_embeddings = nn.Embedding(max_positions, hidden)
        self.embedding_norm = nn.LayerNorm(hidden)
        layer = nn.TransformerEncoderLayer(
            d_model=hidden, nhead=heads, dim_feedforward=ffn, dropout=0.1,
            activation="gelu", batch_first=True, norm_first=False,
        )
        # enable_nested_tensor only matters for padded inference; we train on full sequences.
        self.encoder = nn.TransformerEncoder(layer, num_layers=layers, enable_nested_tensor=False)
        self.head_transform = nn.Sequential(nn.Linear(hidden, hidden), nn.GELU(), nn.LayerNorm(hidden))
        self.decoder_bias = nn.Parameter(torch.zeros(vocab_size))

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(tokens.shape[1], device=tokens.device)
        hidden = self.embedding_norm(self.word_embeddings(tokens) + self.position_embeddings(positions))
        hidden = self.encoder(hidden)
        hidden = self.head_transform(hidden)
        return nn.functional.linear(hidden, self.word_embeddings.weight, self.decoder_bias)


def _torchvision(name: str, **kwargs) -> Callable[[], nn.Module]:
    return lambda: getattr(torchvision.models, name)(weights=None, **kwargs)


def _bert(*, layers: int, hidden: int, heads: int, ffn: int, vocab_size: int, seq_len: int) -> Callable[[], nn.Module]:
    return lambda: MaskedLanguageModel(
        layers=layers, hidden=hidden, heads=heads, ffn=ffn, vocab_size=vocab_size, max_positions=max(512, seq_len)
    )


_BUILDERS: dict[str, Callable[[], nn.Module]] = {
    "resnet50": _torchvision("resnet50"),
    "resnet101": _torchvision("resnet101"),
    "resnet152": _torchvision("resnet152"),
    "vit_b_16": _torchvision("vit_b_16"),
    "bert_large": _bert(layers=24, hidden=1024, heads=16, ffn=4096, vocab_size=30522, seq_len=128),
    "resnet18": _torchvision("resnet18"),
    "tiny_bert": _bert(layers=2, hidden=256, heads=4, ffn=1024, vocab_size=8192, seq_len=64),
}


def _spec(info: ModelInfo) -> ModelSpec:
    facts = {field.name: getattr(info, field.name) for field in fields(ModelInfo)}
    return ModelSpec(**facts, build=_BUILDERS[info.name])


MODELS: dict[str, ModelSpec] = {name: _spec(info) for name, info in CATALOG.items()}
"""The catalog's models with their builders, in catalog order."""


def get_model(name: str) -> ModelSpec:
    """The buildable model ``name``; ValueError listing the known models when the catalog lacks it."""
    return MODELS[model_info(name).name]


def count_train_flops_per_sample(spec: ModelSpec, batch_size: int = 2) -> float:
    """Training FLOPs of one sample as counted by torch (forward × 3), on the CPU.

    Counted in training mode with autograd on, as the benchmark runs: in eval mode under no_grad,
    nn.MultiheadAttention and nn.TransformerEncoder take fused inference kernels that the counter
    does not see, and ViT/BERT would look 1.6x/10x cheaper than they are.
    """
    model = spec.build().train()
    inputs, _ = spec.synthetic_batch(batch_size, torch.device("cpu"))
    counter = FlopCounterMode(display=False)
    # The math backend spells attention out as matmuls the counter sees; torch 2.14's counter has
    # no formula for the fused CPU attention kernel and counts ViT-B/16 4 % short (101.1 vs 105.4).
    with sdpa_kernel(SDPBackend.MATH), counter:
        model(inputs)
    forward = counter.get_total_flops() / batch_size
    assert forward > 0 and math.isfinite(forward)
    return 3.0 * forward
