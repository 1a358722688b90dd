"""lib.nets.wrn: the WRN-28-k of papers 2 and 4 (parameter count of Zagoruyko & Komodakis, outputs)."""

from __future__ import annotations

import pytest
import torch

from lib.nets.wrn import wide_resnet


def _n_params(m: torch.nn.Module) -> int:
    return sum(p.numel() for p in m.parameters())


def test_wide_resnet_parameter_count_and_outputs() -> None:
    # WRN-28-10 has 36.5M parameters (Zagoruyko & Komodakis 2016, Table 1); WRN-28-2 1.47M. Only the
    # small one is built here, for speed.
    net = wide_resnet(28, 2, num_classes=10)
    assert _n_params(net) == pytest.approx(1.467e6, rel=0.005)
    net11 = wide_resnet(28, 2, num_classes=11)  # K = 10 classes + J = 1 expert
    assert net11.out_features == 11
    # The classifier grows by exactly one row of (64 * k) weights + 1 bias per extra output.
    assert _n_params(net11) - _n_params(net) == 64 * 2 + 1
    net11.eval()
    with torch.no_grad():
        assert net11(torch.randn(2, 3, 32, 32)).shape == (2, 11)
    with pytest.raises(ValueError, match="depth"):
        wide_resnet(27, 2, num_classes=10)
    with pytest.raises(ValueError, match="num_classes"):
        wide_resnet(28, 2)
