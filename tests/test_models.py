"""The buildable models: every catalog model builds, its synthetic batch fits it, and its FLOPs match
torch's count."""

import dataclasses

import pytest
import torch

from harness import catalog
from harness.workloads.models import MODELS, count_train_flops_per_sample, get_model


def test_unknown_model_lists_the_known_ones():
    with pytest.raises(ValueError, match="unknown model 'resnet9000'; known models: resnet50"):
        get_model("resnet9000")


def test_every_catalog_model_builds_with_the_catalog_facts():
    assert list(MODELS) == list(catalog.MODELS)
    for name, spec in MODELS.items():
        info = catalog.MODELS[name]
        assert {f.name: getattr(spec, f.name) for f in dataclasses.fields(info)} == dataclasses.asdict(info)
        assert callable(spec.build)


@pytest.mark.parametrize("name", ["resnet18", "tiny_bert"])
def test_cpu_sized_models_train_one_step(name):
    spec = MODELS[name]
    assert spec.cpu_sized
    model = spec.build()
    inputs, targets = spec.synthetic_batch(2, torch.device("cpu"))
    loss = spec.loss(model(inputs), targets)
    loss.backward()
    assert torch.isfinite(loss)


def test_synthetic_batches_have_the_declared_shapes():
    images, labels = MODELS["resnet50"].synthetic_batch(2, torch.device("cpu"))
    assert images.shape == (2, 3, 224, 224) and labels.shape == (2,)
    assert images.is_contiguous(memory_format=torch.channels_last)
    tokens, targets = MODELS["bert_large"].synthetic_batch(2, torch.device("cpu"))
    assert tokens.shape == (2, 128) and targets.shape == (2, 128)
    assert int(tokens.max()) < 30522


def test_channels_last_only_for_cnns():
    assert {n for n, s in MODELS.items() if s.channels_last} == {"resnet18", "resnet50", "resnet101", "resnet152"}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(MODELS))
def test_registered_flops_match_torch_flop_counter(name):
    """The MFU denominator must describe the network we build: within 3 % of torch's own count.

    (BERT's 6 x params x tokens counts the embedding lookups as matmuls and leaves out attention
    scores; at seq 128 those nearly cancel: 257 vs 261.6 GFLOP counted.)
    """
    spec = MODELS[name]
    assert spec.train_flops_per_sample == pytest.approx(count_train_flops_per_sample(spec), rel=0.03)


def test_bert_large_has_the_published_shape():
    model = MODELS["bert_large"].build()
    params = sum(p.numel() for p in model.parameters())
    assert 330e6 < params < 340e6  # BERT-large: 335 M with the decoder tied to the embeddings
    assert len(model.encoder.layers) == 24
