"""The FlashInfer family draws with the manifest's declared draws per row, Philox seed and
offset (``declare_sampling``, from the cases index) and records them in each sampling
case's proof; without a declaration it draws with its constants (64, 20261201, 0), as every
manifest before ``pr-flashinfer-v3``. FlashInfer's sampler is a stand-in here (no GPU): it
records what it was called with and draws row r's token r, so what is under test is the
family's own call and proof."""

from __future__ import annotations

import pytest

from harness.core.errors import KernelChildError
from harness.families import flashinfer

torch = pytest.importorskip("torch")


class _Sampling:
    """Stands in for ``flashinfer.sampling``: one sampler, recording its keyword arguments."""

    def __init__(self) -> None:
        self.calls: list[dict] = []

    def top_p_sampling_from_probs(self, probs, p, indices=None, deterministic=False,
                                  seed=None, offset=None):
        self.calls.append({"outputs": int(indices.shape[0]), "deterministic": deterministic,
                           "seed": seed, "offset": offset})
        return indices.to(torch.int64)  # output j draws its row's own id


def _draw(family: flashinfer.FlashInfer, monkeypatch) -> tuple[dict, dict]:
    module = _Sampling()
    monkeypatch.setattr(flashinfer, "jit_library", lambda: {"stand-in": True})
    recording = flashinfer._Recording(
        flashinfer.EntryObserver(module.top_p_sampling_from_probs,
                                 "top_p_sampling_from_probs"), family)
    logits = torch.zeros(3, 8)
    with recording:
        family.call(module, flashinfer.TOP_P_SAMPLING, "cuda", logits, None,
                    torch.full((3,), 0.5), 0)
    return module.calls[0], recording.proof(3)


def test_without_a_declaration_it_draws_with_its_constants(monkeypatch):
    call, proof = _draw(flashinfer.FlashInfer(), monkeypatch)
    assert call == {"outputs": 3 * 64, "deterministic": True, "seed": 20261201, "offset": 0}
    assert (proof["draws_per_row"], proof["seed"], proof["offset"]) == (64, 20261201, 0)
    assert proof["draws"] == [[[0, 64]], [[1, 64]], [[2, 64]]] and proof["proven"]


def test_it_draws_with_the_declared_values_and_records_them(monkeypatch):
    family = flashinfer.FlashInfer()
    declared = {"draws_per_row": 5, "seed": (1 << 64) - 1, "offset": 9}
    assert family.declare_sampling(declared) == declared  # evidence fields of the child
    call, proof = _draw(family, monkeypatch)
    assert call == {"outputs": 15, "deterministic": True, "seed": (1 << 64) - 1, "offset": 9}
    assert {k: proof[k] for k in declared} == declared
    assert proof["draws"] == [[[0, 5]], [[1, 5]], [[2, 5]]]
    assert flashinfer.FlashInfer().drawing == (64, 20261201, 0)  # one child's family only


@pytest.mark.parametrize("declared", [
    {"draws_per_row": 0, "seed": 1, "offset": 0}, {"draws_per_row": 4, "seed": -1, "offset": 0},
    {"draws_per_row": 4, "seed": 1 << 64, "offset": 0}, {"draws_per_row": 4, "seed": 1},
    {"draws_per_row": 4, "seed": True, "offset": 0}])
def test_a_malformed_declaration_stops_the_child(declared):
    with pytest.raises(KernelChildError, match="declared sampling"):
        flashinfer.FlashInfer().declare_sampling(declared)
