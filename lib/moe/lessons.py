"""Paper 1's methods worked on tiny batches, for the pages that train them to show before they report:
each function feeds a few hand-sized numbers to the function training calls (:mod:`lib.moe.robust`,
:mod:`lib.moe.fgr`, :mod:`lib.moe.mocae`) and lays its output out as a table a reader can check by
eye or by the closed form beside it."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd
import torch

from lib.moe import fgr, mocae, robust

#: Expert probabilities of :func:`filtered_set_table`: 3 examples x 2 experts x 2 classes.
FILTER_EXPERTS = torch.tensor(
    [
        [[0.9, 0.1], [0.9, 0.1]],  # both experts right and agreeing: easy, outside S
        [[0.9, 0.1], [0.2, 0.8]],  # experts disagree: the router matters, in S
        [[0.6, 0.4], [0.6, 0.4]],  # both wrong alike: a high loss no routing can fix, outside S
    ],
    dtype=torch.float64,
)

FILTER_LABELS = torch.tensor([0, 0, 1])  #: The labels of :func:`filtered_set_table`'s three examples.


def tilt_table(losses: torch.Tensor, lams: Sequence[float]) -> pd.DataFrame:
    """One row per lam: the tilted weights of ``losses``, the Robust MoE objective and, beside it,
    its two limits (the mean at lam = 0, the largest loss as lam grows)."""
    return pd.DataFrame(
        {
            "lambda": lam,
            **{f"w{i + 1}": float(v) for i, v in enumerate(robust.tilted_weights(losses, lam))},
            "sum w l (robust_moe_loss)": float(robust.robust_moe_loss(losses, lam)),
            "mean l": float(losses.mean()),
            "max l": float(losses.max()),
        }
        for lam in lams
    )


def filtered_set_table(lam: float = robust.DEFAULT_LAM) -> tuple[pd.DataFrame, float, float]:
    """Robust Filtered on :data:`FILTER_EXPERTS` routed half and half: per example the mixture loss,
    its regret over the best expert, the routing-weighted disagreement and whether it is in S; also
    :func:`lib.moe.robust.robust_filtered_loss` and its closed form mean(l) + sum_{S} softmax(lam l_S) l_S."""
    routing = torch.full(FILTER_EXPERTS.shape[:2], 0.5, dtype=torch.float64)
    mix = (routing[:, :, None] * FILTER_EXPERTS).sum(dim=1)
    idx = torch.arange(len(FILTER_LABELS))
    mix_loss = -torch.log(mix[idx, FILTER_LABELS])
    expert_losses = -torch.log(FILTER_EXPERTS[idx, :, FILTER_LABELS])
    in_s = robust.routing_relevant_mask(mix_loss, expert_losses, routing, FILTER_EXPERTS, mix)
    loss = float(robust.robust_filtered_loss(mix_loss, in_s, lam))
    l_s = mix_loss[in_s]
    closed = float(mix_loss.mean() + (torch.softmax(lam * l_s, 0) * l_s).sum())
    table = pd.DataFrame(
        {
            "mixture loss l": mix_loss.numpy(),
            "regret l - min_k l_k": (mix_loss - expert_losses.min(dim=1).values).numpy(),
            "disagreement": (routing * (FILTER_EXPERTS - mix[:, None]).pow(2).sum(-1)).sum(1).numpy(),
            "in S": in_s.numpy(),
        }
    )
    return table, loss, closed


def rectify_table() -> pd.DataFrame:
    """FGR's rule on two 2-D gradients: conflicting (projected) and agreeing (kept)."""
    g_main = torch.tensor([1.0, 0.0])
    rows = []
    for g_cal in (torch.tensor([-1.0, 1.0]), torch.tensor([1.0, 1.0])):
        out = fgr.rectify(g_main, g_cal)
        rows.append(
            {
                "g_main": g_main.tolist(),
                "g_cal": g_cal.tolist(),
                "<g_main, g_cal>": float(g_main @ g_cal),
                "rectified (fgr.rectify)": out.tolist(),
                "<rectified, g_cal>": float(out @ g_cal),
            }
        )
    return pd.DataFrame(rows)


def mocae_table(temps: Sequence[Sequence[float]]) -> pd.DataFrame:
    """MoCaE's mixture of one example's two experts (logits (2, 0, 0) and (0, 2, 0), routed 0.7 / 0.3)
    at each pair of expert temperatures in ``temps``; T = (1, 1) is Vanilla MoE's mixture."""
    z = torch.tensor([[[2.0, 0.0, 0.0], [0.0, 2.0, 0.0]]], dtype=torch.float64)
    r = torch.tensor([[0.7, 0.3]], dtype=torch.float64)
    rows = []
    for t in temps:
        p = mocae.mocae_probs(z, r, torch.tensor(t, dtype=torch.float64))[0]
        rows.append({"T_1, T_2": tuple(t), **{f"p(class {c})": float(v) for c, v in enumerate(p)}})
    return pd.DataFrame(rows)
