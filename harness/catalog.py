"""The model catalog: what the benchmark can train, and the facts the verdict needs about it.

Torch-free on purpose: profile validation, the plugin, the launcher, the tools and the report read
model names, precisions and FLOPs from here without paying for ``import torch``. What needs torch
(building the network, synthetic batches, the loss, counting FLOPs) lives in
harness/workloads/models.py, keyed by these names.

Training FLOPs are forward + backward ≈ 3 × forward = 6 × multiply-accumulates. The figures for
the full-size models are the published ones collected in docs/references.md (timm GMACs × 6;
BERT: 6 × parameters × tokens); the CPU-sized ones were counted with
``torch.utils.flop_counter.FlopCounterMode`` (forward × 3). ``tests/test_models.py`` checks
every figure against that counter, so a changed builder cannot silently drift from its FLOPs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

InputKind = Literal["image", "tokens"]

PRECISIONS = ("fp32", "fp16", "bf16")
"""Every precision a case can run in, as threshold files and the command line spell them."""
GEMM_DTYPES = ("bf16", "fp16", "tf32", "fp32")
"""What the component GEMM can run in: tf32 is fp32 storage with TF32 tensor-core math (GPUs only)."""
GPU_GEMM_DTYPES = ("bf16", "fp16", "tf32")
CPU_GEMM_DTYPES = ("fp32",)


@dataclass(frozen=True, kw_only=True, slots=True)
class ModelInfo:
    """What the harness knows about one model without building it."""

    name: str
    """Catalog key, as used on the command line and in threshold files."""
    description: str
    input_kind: InputKind
    """``image``: float images (N, 3, H, W) with class labels; ``tokens``: token ids (N, T) with
    a masked-language-model target per position."""
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


_GIGA = 1e9
_TIMM_SOURCE = "docs/references.md: timm GMACs x 6 (forward + backward), 224 px"


def _imagenet_224(name: str, network: str, train_gflop: float, *, channels_last: bool) -> ModelInfo:
    """A torchvision classifier at 224 px and 1000 classes, with its published training FLOPs."""
    return ModelInfo(name=name, description=f"{network} (torchvision), 224 px, 1000 classes", input_kind="image",
                     train_flops_per_sample=train_gflop * _GIGA, flops_source=_TIMM_SOURCE,
                     channels_last=channels_last, image_size_px=224, num_classes=1000)


_CATALOG = (
    _imagenet_224("resnet50", "ResNet-50", 24.7, channels_last=True),
    _imagenet_224("resnet101", "ResNet-101", 47.0, channels_last=True),
    _imagenet_224("resnet152", "ResNet-152", 69.4, channels_last=True),
    # Attention is not a convolution: NHWC buys nothing and costs a transpose.
    _imagenet_224("vit_b_16", "ViT-B/16", 105.5, channels_last=False),
    ModelInfo(
        name="bert_large",
        description="BERT-large encoder (24 layers, 1024 hidden, 16 heads, 4096 FFN) + masked-LM head, seq 128",
        input_kind="tokens", train_flops_per_sample=257.0 * _GIGA,
        flops_source="docs/references.md: 6 x 335 M parameters x 128 tokens",
        channels_last=False, seq_len=128, vocab_size=30522,
    ),
    ModelInfo(
        name="resnet18",
        description="ResNet-18 (torchvision) at 64 px, 1000 classes: CPU-sized",
        input_kind="image", train_flops_per_sample=0.894 * _GIGA,
        flops_source="torch FlopCounterMode, forward x 3, 64 px", channels_last=True,
        image_size_px=64, num_classes=1000, cpu_sized=True,
    ),
    ModelInfo(
        name="tiny_bert",
        description="2-layer BERT-style encoder (256 hidden, 4 heads, 1024 FFN, vocab 8192) "
                    "+ MLM head, seq 64: CPU-sized",
        input_kind="tokens", train_flops_per_sample=1.458 * _GIGA,
        flops_source="torch FlopCounterMode, forward x 3, seq 64", channels_last=False,
        seq_len=64, vocab_size=8192, cpu_sized=True,
    ),
)

MODELS: dict[str, ModelInfo] = {info.name: info for info in _CATALOG}
"""Every model the harness can train, by name, in catalog order."""


def model_info(name: str) -> ModelInfo:
    """The catalog entry of ``name``; ValueError listing the known models when there is none."""
    try:
        return MODELS[name]
    except KeyError:
        raise ValueError(f"unknown model {name!r}; known models: {', '.join(MODELS)}") from None
