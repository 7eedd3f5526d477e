"""CI's skip policy (tests/ci_skip_policy.py): with AGENT_RL_FAIL_ON_SKIP=1 a skip that is not
allow-listed fails the run. Each case runs pytest in a subprocess on a tiny temporary test file
with the real plugin loaded and an allow-list set by the temporary conftest."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import ci_skip_policy

TESTS_DIR = Path(__file__).resolve().parent

SAMPLE = """
import pytest

def test_passes():
    assert True

def test_skips():
    pytest.skip("no widget here")
"""


def run_pytest(tmp_path: Path, test_source: str, *, env_value: str | None, allow: str = "()") -> subprocess.CompletedProcess:
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "conftest.py").write_text(textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(TESTS_DIR)!r})
        pytest_plugins = ["ci_skip_policy"]

        def pytest_configure(config):
            import ci_skip_policy
            from ci_skip_policy import AllowedSkip
            ci_skip_policy.ALLOWED_SKIPS = {allow}
    """))
    (tmp_path / "test_sample.py").write_text(textwrap.dedent(test_source))
    env = {k: v for k, v in os.environ.items() if k not in (ci_skip_policy.ENV_VAR, "PYTEST_ADDOPTS")}
    if env_value is not None:
        env[ci_skip_policy.ENV_VAR] = env_value
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"  # the policy comes through the conftest; other plugins cost ~2 s a run
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_sample.py"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)


def test_a_skip_not_allow_listed_fails_the_run(tmp_path):
    result = run_pytest(tmp_path, SAMPLE, env_value="1")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "SKIP NOT ALLOWED test_sample.py::test_skips: no widget here" in result.stdout
    assert "1 passed, 1 skipped in" in result.stdout  # and no warning


@pytest.mark.parametrize("env_value", [None, "0", ""])
def test_without_the_variable_a_skip_is_only_a_skip(tmp_path, env_value):
    result = run_pytest(tmp_path, SAMPLE, env_value=env_value)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "NOT ALLOWED" not in result.stdout


def test_an_allow_listed_skip_passes_and_is_listed_with_its_reason(tmp_path):
    allow = '(AllowedSkip("test_sample.py::test_sk*", r"no widget", "widgets are rare"),)'
    result = run_pytest(tmp_path, SAMPLE, env_value="1", allow=allow)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "test_sample.py::test_skips: no widget here (allowed: widgets are rare)" in result.stdout


def test_the_reason_must_match_too(tmp_path):
    allow = '(AllowedSkip("test_sample.py::test_skips", r"no GPU", "GPU only"),)'
    result = run_pytest(tmp_path, SAMPLE, env_value="1", allow=allow)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "SKIP NOT ALLOWED test_sample.py::test_skips" in result.stdout


def test_a_module_level_importorskip_fails_the_run(tmp_path):
    source = """
        import pytest
        pytest.importorskip("agent_rl_no_such_module")

        def test_never_runs():
            pass
    """
    result = run_pytest(tmp_path, source, env_value="1")
    assert result.returncode == 1, result.stdout + result.stderr
    assert re.search(r"SKIP NOT ALLOWED test_sample\.py: .*agent_rl_no_such_module", result.stdout)


def test_a_skipif_marker_fails_the_run_and_a_real_failure_stays_a_failure(tmp_path):
    source = """
        import pytest

        @pytest.mark.skipif(True, reason="not on this machine")
        def test_marked():
            pass

        def test_fails():
            assert False
    """
    result = run_pytest(tmp_path, source, env_value="1")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "SKIP NOT ALLOWED test_sample.py::test_marked: not on this machine" in result.stdout
    assert "1 failed" in result.stdout


def test_an_xfail_is_not_a_skip(tmp_path):
    source = """
        import pytest

        @pytest.mark.xfail(reason="known bug", strict=True)
        def test_known_bug():
            assert False
    """
    result = run_pytest(tmp_path, source, env_value="1")
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_allow_list_entry_is_specific_and_says_why():
    for entry in ci_skip_policy.ALLOWED_SKIPS:
        assert entry.nodeid.startswith("tests/test_") and entry.nodeid != "tests/test_*", entry
        re.compile(entry.reason)
        assert entry.reason.strip() and len(entry.why) > 20, entry
