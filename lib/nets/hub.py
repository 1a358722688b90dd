"""Whether the Hugging Face hub can be reached (used by the image and text backbones)."""

from __future__ import annotations

import os
import socket

__all__ = ["hub_reachable"]


def hub_reachable(timeout: float = 2.0) -> bool:
    """Whether the Hugging Face hub can be reached: False when HF_HUB_OFFLINE is set or a TCP
    connection to huggingface.co:443 fails within ``timeout`` seconds. Used to skip the hub clients'
    retry loop (about a minute) on offline machines and read the local cache only."""
    if os.environ.get("HF_HUB_OFFLINE", "0").strip().lower() in ("1", "true", "yes", "on"):
        return False
    try:
        with socket.create_connection(("huggingface.co", 443), timeout=timeout):
            return True
    except OSError:
        return False
