"""Paper 4's runs (Zhou et al., "Revisiting Reweighted Risk for Calibration", Tables 1-2 and 4,
Figures 2-3, App. Figure 6, Appendices D-E): the compared losses with the paper's settings (:func:`make_loss`),
one cached run per loss (:func:`run_loss`: the whole network at paper scale, SGD lr 0.1, momentum 0.9,
wd 5e-4, batch 128, lr x0.2 at epochs 60/120/160, 200 epochs; below it a 2-layer head on one frozen
cross-entropy backbone's features, a stand-in in which the loss shapes the head alone) and their
metrics (:func:`evaluate_logits`). Losses: :mod:`lib.rr.losses`; images and loops:
:mod:`lib.nets.image_training`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import torch

from lib.rr import losses as rw
from lib.engine.cache import Run, cached_run, load_artifact
from lib.engine.loop import Diverged
from lib.nets import image_training as imt
from lib.validation import check_choice, check_record, to_numpy

MODES: tuple[str, ...] = ("features", "end_to_end")
# The metrics of evaluate_logits: each before and after temperature scaling.
METRICS: tuple[str, ...] = (
    "temperature",
    *(f"{m}{s}" for s in ("", "_ts") for m in ("accuracy", "ece", "ece_a", "cwece", "cwece_a", "nll", "conf_gap")),
)
CONFIG_KEYS: tuple[str, ...] = ("loss", "seed", "coverage", "nu")  # what a record's config names

# name -> (its label in the paper's tables, lib.rr.losses loss name, keyword arguments). Paper settings:
# FL-53 (gamma 5 below p_t = 0.2, else 3); inverse focal gamma = 2 and dual focal gamma = 5 (Appendix
# Table 2, CIFAR-10 ResNet-50; a scale's ``gamma_dual_focal``/``gamma_inverse_focal`` override them, e.g.
# the WRN-28-10 row at paper scale); dual focal as the released code computes it (competitor = largest
# probability strictly below p_t), since the paper's numbers come from that implementation; KDE-XE
# lambda = 0.3 (CIFAR-10); AU loss with the MSP CSF by default.
LOSS_SPECS: dict[str, tuple[str, str, dict[str, Any]]] = {
    "xe": ("XE", "xe", {}),
    "fl53": ("FL-53", "fl53", {}),
    "inverse_focal": ("Inv. FL", "inverse_focal", {"gamma": 2.0}),
    "dual_focal": ("Dual", "dual_focal", {"gamma": 5.0, "variant": "released"}),
    "kde_xe": ("KDE-XE", "kde_xe", {"weight": 0.3}),
    "aurc": ("AURC", "aurc", {}),
    "au": ("AU (MSP)", "au", {"csf": "msp"}),
    "au_margin": ("AU (margin)", "au", {"csf": "softmax_margin"}),
    "au_entropy": ("AU (neg. entropy)", "au", {"csf": "normalized_entropy"}),
}
LABELS: dict[str, str] = {name: label for name, (label, _, _) in LOSS_SPECS.items()}
TABLE_LOSSES: tuple[str, ...] = ("xe", "fl53", "inverse_focal", "dual_focal", "kde_xe", "aurc", "au")
CSF_LOSSES: tuple[str, ...] = ("au", "au_margin", "au_entropy")


def make_loss(
    name: str, coverage: float = 0.8, nu: float = 0.1, n_bins: int = 15, gamma: float | None = None
) -> Callable[[Any, Any], torch.Tensor]:
    """The loss ``name`` (a key of ``LOSS_SPECS``) as ``(logits, labels) -> scalar``; the AU
    variants take ``coverage`` (kappa), ``nu`` and ``n_bins`` (M); ``gamma`` overrides the focal
    variants' gamma (App. Table 2 per architecture)."""
    check_choice(name, tuple(LOSS_SPECS), "name")
    _, base, kw = LOSS_SPECS[name]
    kw = dict(kw)
    if gamma is not None and "gamma" in kw:
        kw["gamma"] = float(gamma)
    if base == "au":
        kw.update(coverage=coverage, nu=nu, n_bins=n_bins)
    return rw.get_loss(base, **kw)


# --- Metrics --------------------------------------------------------------------------------------
def evaluate_logits(
    val_logits: Any, val_y: Any, test_logits: Any, test_y: Any, n_bins: int = 15, ts_criterion: str = "ece"
) -> dict[str, float]:
    """Test ``accuracy``, ``ece`` (equal width), ``ece_a`` (equal mass), ``cwece``, ``cwece_a``,
    ``nll``, ``conf_gap`` (mean confidence - accuracy), each also after temperature scaling (``_ts``;
    T fitted on the validation logits by ``ts_criterion``, "ece" as paper 4 or "nll"), and
    ``temperature``. Fractions, not x100."""
    from lib.calibration.metrics import accuracy, classwise_ece, ece, nll
    from lib.calibration.posthoc import TemperatureScaler, apply_temperature

    zv, yv = to_numpy(val_logits, "val_logits"), to_numpy(val_y, "val_y", dtype=np.int64)
    T = TemperatureScaler(ts_criterion, n_bins=n_bins).fit(zv, yv).temperature
    zt, yt = to_numpy(test_logits, "test_logits"), to_numpy(test_y, "test_y", dtype=np.int64)
    out: dict[str, float] = {"temperature": float(T)}
    for suffix, temp in (("", 1.0), ("_ts", T)):
        p = np.asarray(apply_temperature(zt, temp), dtype=np.float64)
        acc = accuracy(p, yt)
        out[f"accuracy{suffix}"] = acc
        out[f"ece{suffix}"] = ece(p, yt, n_bins, "width")
        out[f"ece_a{suffix}"] = ece(p, yt, n_bins, "mass")
        out[f"cwece{suffix}"] = classwise_ece(p, yt, n_bins, "width")
        out[f"cwece_a{suffix}"] = classwise_ece(p, yt, n_bins, "mass")
        out[f"nll{suffix}"] = nll(p, yt)
        out[f"conf_gap{suffix}"] = float(p.max(axis=1).mean() - acc)
    return out


TS_BOTH_KEYS: tuple[str, ...] = ("temperature", "ece_ts", "ece_a_ts", "cwece_ts", "cwece_a_ts", "nll_ts", "conf_gap_ts")


def evaluate_logits_both(
    val_logits: Any, val_y: Any, test_logits: Any, test_y: Any, n_bins: int = 15
) -> dict[str, float]:
    """:func:`evaluate_logits` with T fitted by ECE (paper 4's choice), plus ``TS_BOTH_KEYS`` with T
    fitted by NLL (papers 1-3) under the suffix ``_nll``."""
    out = evaluate_logits(val_logits, val_y, test_logits, test_y, n_bins=n_bins, ts_criterion="ece")
    by_nll = evaluate_logits(val_logits, val_y, test_logits, test_y, n_bins=n_bins, ts_criterion="nll")
    out.update({f"{k}_nll": by_nll[k] for k in TS_BOTH_KEYS})
    return out


# --- Runs -----------------------------------------------------------------------------------------
RUN_KEYS = (*imt.TRAIN_KEYS, "milestones")


def loss_config(
    name: str, cfg: Mapping[str, Any], seed: int = 0, coverage: float | None = None, nu: float | None = None
) -> dict[str, Any]:
    """What determines one :func:`run_loss` run besides its data: the loss, seed, AU coverage and
    smoothing (``None``: the scale's), the bins and the scale's training settings (``RUN_KEYS``, gammas)."""
    return {
        "loss": name,
        "seed": int(seed),
        "coverage": float(cfg["coverage"] if coverage is None else coverage),
        "nu": float(cfg["nu"] if nu is None else nu),
        "n_bins": cfg["n_bins"],
        **{k: cfg[k] for k in RUN_KEYS},
        **{k: cfg[k] for k in ("gamma_dual_focal", "gamma_inverse_focal") if k in cfg},
    }


def run_loss(
    name: str,
    cfg: Mapping[str, Any],
    data: Mapping[str, Any],
    seed: int = 0,
    coverage: float | None = None,
    nu: float | None = None,
) -> dict[str, Any]:
    """Train with loss ``name`` at the scale's ``mode`` and evaluate (cached by config and data): the
    :func:`evaluate_logits` metrics and the logits beside them (:func:`run_logits`); a head keeps its
    ``train_accuracy``, and one that diverges a record of NaN metrics with ``diverged_epoch``."""
    check_choice(cfg["mode"], MODES, "mode")
    config = {**loss_config(name, cfg, seed, coverage, nu), "data": data["tag"]}
    loss = make_loss(name, config["coverage"], config["nu"], cfg["n_bins"], gamma=cfg.get(f"gamma_{name}"))

    def compute(r: Run) -> dict[str, Any]:
        if cfg["mode"] == "features":
            f = imt.standardize(imt.backbone_features(cfg, data))
            extra = {"backbone_test_accuracy": f["backbone_test_accuracy"]}
            y_head = torch.as_tensor(f["head_y"])
            try:
                head = imt.train_head(f["head_x"], y_head, loss, cfg, data["num_classes"], seed)
            except Diverged as err:  # a result of the loss's settings (the AU sweep's steepest nu): said, not hidden
                return {"loss": name, "metrics": dict.fromkeys(METRICS, np.nan), "diverged_epoch": err.epoch, **extra}
            with torch.no_grad():
                zv, zt = head(f["val_x"]), head(f["test_x"])
                extra["train_accuracy"] = float((head(f["head_x"]).argmax(1) == y_head).float().mean())
            yv, yt = f["val_y"], f["test_y"]
        else:
            train, val = (data["train_x"], data["train_y"]), (data["val_x"], data["val_y"])
            settings = {**cfg, "schedule": "multistep"}
            net, hist = imt.fit_images(data["num_classes"], loss, train, val, settings, r, seed=seed)
            zv, zt = imt.predict_logits(net, data["val_x"]), imt.predict_logits(net, data["test_x"])
            yv, yt = data["val_y"].numpy(), data["test_y"].numpy()
            extra = {"history": hist}
        r.save_arrays("logits", val=zv.numpy(), test=zt.numpy(), val_y=yv, test_y=yt)
        return {"loss": name, "metrics": evaluate_logits(zv, yv, zt, yt), **extra}

    return cached_run("rr_losses", config, compute)


def loss_record(rec: Any) -> Mapping[str, Any]:
    """``rec`` if it is a record of :func:`run_loss` (cached or published): its config names the
    ``CONFIG_KEYS`` and each of its ``METRICS`` is a number; ``ValueError`` naming the run and the
    field otherwise."""
    return check_record(rec, "a paper-4 record of lib.rr.experiment.run_loss", CONFIG_KEYS, METRICS, "metrics")


def run_logits(record: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """The validation and test logits and labels :func:`run_loss` saved beside ``record`` (a
    :func:`loss_record`), verified against it."""
    return load_artifact(loss_record(record), "logits")
