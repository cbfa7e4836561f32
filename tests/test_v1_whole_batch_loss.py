"""What ``trainer.v1.whole_batch_update`` does to the update itself, through verl's own policy loss.

verl's v1 ``_update_actor`` sends a mini-batch of ``ppo_mini_batch_size x n`` rows, padding rows included
(``construct_minimal_padding_template``: a zero response mask), and sets ``global_batch_size`` to that row count;
the FSDP engine sums the mini-batch's loss tokens into ``batch_num_tokens`` and adds each micro-batch's loss. The
whole-batch update sends the real rows (padded to the data-parallel ranks only) with ``global_batch_size`` their
count. Under ``token-mean`` (verl's default, and the folding config's) the gradient is the same; under the seq-mean
modes verl divides by the rows, padding included, so the padded update is the smaller one by rows / real rows.
"""

from __future__ import annotations

import pytest
import torch
from verl.trainer.ppo.core_algos import get_policy_loss_fn
from verl.workers.config import FSDPActorConfig

LENGTHS = [5, 3, 1, 4, 2, 5]  # six real rows' response tokens
TOKENS = 5
MINI_BATCH = 32  # verl's padded mini-batch: 26 padding rows


def real_rows() -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    rows = len(LENGTHS)
    old = -torch.rand(rows, TOKENS, generator=generator)
    return {
        "mask": (torch.arange(TOKENS) < torch.tensor(LENGTHS)[:, None]).float(),
        "old": old,
        "new": old + 0.05 * torch.randn(rows, TOKENS, generator=generator),
        "advantages": torch.randn(rows, 1, generator=generator).expand(rows, TOKENS).clone(),
    }


def gradient(mode: str, rows: int, micro_batch: int = 8) -> torch.Tensor:
    """The loss's gradient on the real rows' log-probs, the mini-batch holding ``rows`` rows (the real ones, then
    padding rows), computed the way verl's FSDP engine does: global token count and row count, a sum over
    micro-batches of ``micro_batch`` rows."""
    real = real_rows()
    new = real["new"].clone().requires_grad_()
    padding = rows - len(LENGTHS)
    zeros = torch.zeros(padding, TOKENS)
    mask = torch.cat([real["mask"], zeros])
    old = torch.cat([real["old"], zeros])
    log_prob = torch.cat([new, zeros])
    advantages = torch.cat([real["advantages"], zeros])
    config = FSDPActorConfig(
        strategy="fsdp", ppo_mini_batch_size=4, use_dynamic_bsz=True, rollout_n=8, loss_agg_mode=mode
    )
    config.global_batch_info.update(
        dp_size=1, batch_num_tokens=int(mask.sum()), global_batch_size=rows, loss_scale_factor=None
    )
    loss_fn = get_policy_loss_fn("vanilla")
    total = torch.zeros(())
    for start in range(0, rows, micro_batch):
        part = slice(start, start + micro_batch)
        loss, _ = loss_fn(
            old_log_prob=old[part],
            log_prob=log_prob[part],
            advantages=advantages[part],
            response_mask=mask[part].bool(),
            loss_agg_mode=mode,
            config=config,
        )
        total = total + loss
    total.backward()
    assert new.grad is not None
    return new.grad


def test_token_mean_gives_the_padded_update() -> None:
    whole, padded = gradient("token-mean", len(LENGTHS)), gradient("token-mean", MINI_BATCH)
    assert whole.abs().sum() > 0
    torch.testing.assert_close(whole, padded, rtol=0, atol=1e-7)


@pytest.mark.parametrize("mode", ["seq-mean-token-mean", "seq-mean-token-sum"])
def test_the_seq_mean_modes_divide_the_padded_update_by_its_rows(mode: str) -> None:
    whole, padded = gradient(mode, len(LENGTHS)), gradient(mode, MINI_BATCH)
    assert whole.abs().sum() > 0
    torch.testing.assert_close(padded * MINI_BATCH / len(LENGTHS), whole, rtol=1e-6, atol=1e-7)
