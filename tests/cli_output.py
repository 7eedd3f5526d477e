"""Running the ``agent-rl`` command line in-process in a test: what it printed."""

from __future__ import annotations

import pytest

from agent_rl_plugin.cli.main import main


def cli_output(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    """Run ``agent-rl ARGS`` in this process; its standard output (it must exit 0)."""
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_info:
        main(list(args))
    out, err = capsys.readouterr()
    assert (exit_info.value.code or 0) == 0, err
    return out
