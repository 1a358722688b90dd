"""The setup script is a fast no-op once the environment is installed."""

import subprocess
import time

from lib.config import repo_root


def test_repeated_setup_is_a_fast_noop() -> None:
    start = time.time()
    out = subprocess.run(["bash", "scripts/setup.sh"], cwd=repo_root(), capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout == "" and time.time() - start < 10
