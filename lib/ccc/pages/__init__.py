"""Paper 3's pages, one module per notebook, and what they (and the cross-paper chapter) share:
none trains, the models' logits are loaded."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from lib import report
from lib.page import Page
from lib.validation import check_int, check_number


class CCCPage(Page):
    """A paper-3 page: its numbers come from real logits or, at smoke scale, synthetic ones; its scale
    line is ``real_summary`` or ``synthetic_summary`` formatted with the settings (and ``losses``,
    the ResNet-50s' joined by "/", and ``loss``, the one ResNet-50's in capitals)."""

    paper = "ccc"
    paper_on_cpu = True  # released logits: the paper scale is minutes on a CPU
    real_summary: str = ""
    synthetic_summary: str = ""

    def scale_summary(self, cfg: Mapping[str, Any]) -> str:
        """What produced the page's numbers, in one line."""
        line = self.real_summary if cfg["data"] == "real" else self.synthetic_summary
        return line.format(
            **cfg, losses="/".join(cfg.get("resnet_losses", ())), loss=cfg.get("resnet_loss", "").upper()
        )


def ece_se(n: int, accuracy: float = 0.5) -> float:
    """The standard error of a binned ECE on ``n`` examples, at most ``sqrt(a (1 - a) / n)`` for a
    model of accuracy ``a`` (``0.5 / sqrt(n)`` whatever the accuracy, the default).

    ECE = sum_b (n_b / n) abs(acc_b - conf_b); with the bins fixed, each bin's accuracy is a mean of
    n_b outcomes (variance acc_b (1 - acc_b) / n_b <= 1 / (4 n_b)) and bins are independent, so the
    weighted sum has variance sum_b (n_b / n)^2 acc_b (1 - acc_b) / n_b = (1 / n) sum_b (n_b / n)
    acc_b (1 - acc_b) <= a (1 - a) / n, since a (1 - a) is concave and a = sum_b (n_b / n) acc_b.
    The same bar serves a difference of two ECEs on the same rows (their errors are positively
    correlated, so it is conservative there); for two models, pass the accuracy nearer 0.5.
    """
    a = check_number(accuracy, "accuracy", 0.0, 1.0)
    return math.sqrt(a * (1 - a) / check_int(n, "n"))


def floored_verdict(effect: float, split_se: float | None, n_splits: int, test_se: float) -> str:
    """:func:`lib.report.t_verdict` of ``effect`` (signed so that positive supports the claim) against
    the larger of two noise bars: ``split_se``, the standard error over ``n_splits`` random splits of
    one data set, at n - 1 degrees of freedom (none with one split); and ``test_se``, the closed-form
    standard error of a finite test set (on thousands of examples: infinite degrees of freedom). The
    splits share most of their examples, so their spread alone understates the noise of the data set:
    more splits shrink the first bar, never the second."""
    check_int(n_splits, "n_splits")
    bars = [(check_number(test_se, "test_se", 0.0), math.inf)]
    if split_se is not None and math.isfinite(split_se) and n_splits >= 2:
        bars.append((float(split_se), n_splits - 1))
    se, df = max(bars, key=lambda b: report.critical_value(b[1]) * b[0])
    return report.t_verdict(float(effect), se, df=df)


def splits_verdict(diffs: Any, test_se: float) -> str:
    """:func:`floored_verdict` of the mean of the per-split differences ``diffs`` (an array; positive
    supports the claim): their paired SE over the n splits, floored by the test set's ``test_se`` (the
    floor is what sets it apart from :func:`lib.report.paired_verdict` over seeds)."""
    return floored_verdict(float(diffs.mean()), report.standard_error(diffs), diffs.size, test_se)


def logits_data(real: bool, losses: Sequence[str], n_synthetic: int, seed: int) -> tuple[Any, dict[str, Any], Any]:
    """``(mmlu, resnets, labels)``: the MMLU data and the ResNet-50s' CIFAR-10 logits of ``losses``;
    the files when ``real``, else synthetic stand-ins."""
    from lib.data import logits, mmlu

    if real:
        return (mmlu.load_mmlu(), *logits.load_resnet50_pair(tuple(losses)))
    resnets, y = logits.synthetic_resnet_logits(n_synthetic, tuple(losses), seed=seed)
    return mmlu.synthetic_mmlu(n_synthetic, seed=seed), resnets, y


def released_runs_note(used: Sequence[str], real: bool) -> str:
    """What a page reading paper 4's released ResNet-50 logits owes its reader about the runs it
    reads (``used``): the XE run is an outlier, the ``focal`` file is taken to be FL-53."""
    from scipy.special import softmax

    from lib.calibration.metrics import ece
    from lib.data import logits

    if real:
        runs = {loss: logits.load_resnet50_logits(loss) for loss in logits.LOSSES if loss not in logits.DEGENERATE}
        acc = {k: float((z.argmax(1) == y).mean()) for k, (z, y) in runs.items()}
        xe_ece = ece(softmax(runs["ce"][0], axis=1), runs["ce"][1])
        others = min(v for k, v in acc.items() if k != "ce")
        numbers = (
            f"{acc['ce']:.2%} accuracy, ECE {xe_ece:.2%}, against at least {others:.2%} for every other released run"
        )
    else:
        numbers = "at this scale synthetic logits stand in for it; at cpu scale its accuracy is printed here"
    text = ""
    if "ce" in used:
        text += (
            '**The XE model here is an outlier.** "The XE model" on this page is paper 4\'s released '
            f"cross-entropy run (`ce`, seed 40; {numbers}): a weaker and more over-confident ResNet-50 "
            "than the paper's own XE row, so what this page finds for it need not hold for a typical "
            "cross-entropy model."
        )
    if "focal" in used:
        text += (
            " The released `focal` file is assumed to be FL-53 (focal loss with gamma 5 where the true "
            "class's probability is below 0.2, else 3; Mukhoti et al. 2020): the file does not say which "
            "focal variant it holds."
        )
    return text.strip()
