"""A tenant's ``max_checkpoint_mb``: what one save may add beside its other runs' checkpoints,
and how the quota is stored so that one left at its default follows the default."""

from __future__ import annotations

import pytest

from herder.domain.checkpoints import DEFAULT_MAX_CHECKPOINT_MB, MIB, quota_refusal
from herder.domain.tenants import TenantQuotas, stored_quotas


@pytest.mark.parametrize(
    ("kept", "saving", "max_mb", "refused"),
    [
        (0, MIB, 1, False),  # exactly the bound
        (0, MIB + 1, 1, True),
        (MIB - 10, 10, 1, False),
        (MIB - 10, 11, 1, True),
        (10 * 1024 * MIB, MIB, None, False),  # unlimited
        (0, 1, DEFAULT_MAX_CHECKPOINT_MB, False),
    ],
)
def test_a_save_fits_what_the_other_runs_leave(
    kept: int, saving: int, max_mb: int | None, refused: bool
) -> None:
    why = quota_refusal(kept, saving, max_mb)
    assert (why is not None) == refused
    if why is not None:
        assert f"past its max_checkpoint_mb ({max_mb} MiB" in why
        assert "keeps its previous checkpoint" in why


@pytest.mark.parametrize(
    ("quotas", "stored"),
    [
        (TenantQuotas(), {}),  # the default is not written: it follows the default
        (TenantQuotas(max_checkpoint_mb=None), {"max_checkpoint_mb": None}),  # unlimited
        (
            TenantQuotas(max_checkpoint_mb=512, max_gpus=2),
            {"max_checkpoint_mb": 512, "max_gpus": 2},
        ),
        (TenantQuotas(max_cpu=None), {}),  # the other quotas' null is their default
    ],
)
def test_quotas_are_stored_as_what_differs_from_the_defaults(
    quotas: TenantQuotas, stored: dict[str, object]
) -> None:
    assert stored_quotas(quotas) == stored
    assert TenantQuotas.model_validate(stored) == quotas
