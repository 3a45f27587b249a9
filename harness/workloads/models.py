"""The model registry: what the benchmark trains, and the facts the verdict needs about it.

Each entry knows how to build its network (no downloads: random weights), what its synthetic
input looks like, how many floating-point operations one training sample costs (for TFLOP/s and
MFU), and whether it runs in channels_last memory format.

Training FLOPs are forward + backward ≈ 3 × forward = 6 × multiply-accumulates. The figures for
the full-size models are the published ones collected in shared/REFERENCE.md (timm GMACs × 6;
BERT: 6 × parameters × tokens); the CPU-sized ones were counted with
``torch.utils.flop_counter.FlopCounterMode`` (forward × 3). ``tests/test_models.py`` checks
every figure against that counter, so a changed builder cannot silently drift from its FLOPs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Literal

import torch
from torch import nn

InputKind = Literal["image", "tokens"]


@dataclass(frozen=True, kw_only=True, slots=True)
class ModelSpec:
    name: str
    """Registry key, as used on the command line and in threshold files."""
    description: str
    input_kind: InputKind
    """``image``: float images (N, 3, H, W) with class labels; ``tokens``: token ids (N, T) with
    a masked-language-model target per position."""
    build: Callable[[], nn.Module]
    train_flops_per_sample: float
    """Floating-point operations of one training sample (forward + backward), in FLOP."""
    flops_source: str
    channels_last: bool
    """CNNs run NHWC: cuDNN's fastest tensor-core convolutions want it."""
    image_size_px: int | None = None
    num_classes: int | None = None
    seq_len: int | None = None
    vocab_size: int | None = None
    cpu_sized: bool = False
    """Small enough that a 2-core CPU trains a step in well under a second (the ``cpu`` profile)."""

    @property
    def sample_unit(self) -> str:
        return "images" if self.input_kind == "image" else "sequences"

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
    def build() -> nn.Module:
        import torchvision.models  # imported late: it costs ~1 s and the CLI should start fast

        return getattr(torchvision.models, name)(weights=None, **kwargs)

    return build


def _bert(*, layers: int, hidden: int, heads: int, ffn: int, vocab_size: int, seq_len: int) -> Callable[[], nn.Module]:
    return lambda: MaskedLanguageModel(
        layers=layers, hidden=hidden, heads=heads, ffn=ffn, vocab_size=vocab_size, max_positions=max(512, seq_len)
    )


_GIGA = 1e9
_REFERENCE = "shared/REFERENCE.md: timm GMACs x 6 (forward + backward), 224 px"

_SPECS = [
    ModelSpec(
        name="resnet50", description="ResNet-50 (torchvision), 224 px, 1000 classes",
        input_kind="image", build=_torchvision("resnet50"), train_flops_per_sample=24.7 * _GIGA,
        flops_source=_REFERENCE, channels_last=True, image_size_px=224, num_classes=1000,
    ),
    ModelSpec(
        name="resnet101", description="ResNet-101 (torchvision), 224 px, 1000 classes",
        input_kind="image", build=_torchvision("resnet101"), train_flops_per_sample=47.0 * _GIGA,
        flops_source=_REFERENCE, channels_last=True, image_size_px=224, num_classes=1000,
    ),
    ModelSpec(
        name="resnet152", description="ResNet-152 (torchvision), 224 px, 1000 classes",
        input_kind="image", build=_torchvision("resnet152"), train_flops_per_sample=69.4 * _GIGA,
        flops_source=_REFERENCE, channels_last=True, image_size_px=224, num_classes=1000,
    ),
    ModelSpec(
        name="vit_b_16", description="ViT-B/16 (torchvision), 224 px, 1000 classes",
        input_kind="image", build=_torchvision("vit_b_16"), train_flops_per_sample=105.5 * _GIGA,
        # Attention is not a convolution: NHWC buys nothing and costs a transpose.
        flops_source=_REFERENCE, channels_last=False, image_size_px=224, num_classes=1000,
    ),
    ModelSpec(
        name="bert_large",
        description="BERT-large encoder (24 layers, 1024 hidden, 16 heads, 4096 FFN) + masked-LM head, seq 128",
        input_kind="tokens",
        build=_bert(layers=24, hidden=1024, heads=16, ffn=4096, vocab_size=30522, seq_len=128),
        train_flops_per_sample=257.0 * _GIGA,
        flops_source="shared/REFERENCE.md: 6 x 335 M parameters x 128 tokens",
        channels_last=False, seq_len=128, vocab_size=30522,
    ),
    ModelSpec(
        name="resnet18",
        description="ResNet-18 (torchvision) at 64 px, 1000 classes: CPU-sized",
        input_kind="image", build=_torchvision("resnet18"), train_flops_per_sample=0.894 * _GIGA,
        flops_source="torch FlopCounterMode, forward x 3, 64 px", channels_last=True,
        image_size_px=64, num_classes=1000, cpu_sized=True,
    ),
    ModelSpec(
        name="tiny_bert",
        description="2-layer BERT-style encoder (256 hidden, 4 heads, 1024 FFN, vocab 8192) + MLM head, seq 64: CPU-sized",
        input_kind="tokens",
        build=_bert(layers=2, hidden=256, heads=4, ffn=1024, vocab_size=8192, seq_len=64),
        train_flops_per_sample=1.458 * _GIGA,
        flops_source="torch FlopCounterMode, forward x 3, seq 64", channels_last=False,
        seq_len=64, vocab_size=8192, cpu_sized=True,
    ),
]

MODELS: dict[str, ModelSpec] = {spec.name: spec for spec in _SPECS}

PRECISIONS = ("fp32", "fp16", "bf16")


def get_model(name: str) -> ModelSpec:
    try:
        return MODELS[name]
    except KeyError:
        raise ValueError(f"unknown model {name!r}; known models: {', '.join(MODELS)}") from None


def count_train_flops_per_sample(spec: ModelSpec, batch_size: int = 2) -> float:
    """Training FLOPs of one sample as counted by torch (forward × 3), on the CPU.

    Counted in training mode with autograd on, as the benchmark runs: in eval mode under no_grad,
    nn.MultiheadAttention and nn.TransformerEncoder take fused inference kernels that the counter
    does not see, and ViT/BERT would look 1.6x/10x cheaper than they are.
    """
    from torch.utils.flop_counter import FlopCounterMode

    model = spec.build().train()
    inputs, _ = spec.synthetic_batch(batch_size, torch.device("cpu"))
    counter = FlopCounterMode(display=False)
    with counter:
        model(inputs)
    forward = counter.get_total_flops() / batch_size
    assert forward > 0 and math.isfinite(forward)
    return 3.0 * forward
