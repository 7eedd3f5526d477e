"""Model loading is offline by default (issue 18, item 2): an unknown model name (a typo) fails in
well under 2 s, where hub retries took about a minute, with a message naming where it looked
(the local path, the Hugging Face cache) and the fix; a cached name loads without the network;
``allow_download`` / ``--allow-download`` / ``AGENT_RL_ALLOW_DOWNLOAD=1`` opt in.

A real Hugging Face cache is built under ``tmp_path`` (the hub's layout: ``models--org--name``
with ``refs/main`` and a snapshot holding a tiny saved model) and made the cache for the test.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

pytest.importorskip("transformers")

from huggingface_hub import constants  # noqa: E402

from agent_rl_plugin.cli.main import main  # noqa: E402
from agent_rl_plugin.policy import LocalPolicy, PolicyError  # noqa: E402
from agent_rl_plugin.train import build_tiny_model  # noqa: E402
from agent_rl_plugin.train.loading import (  # noqa: E402
    ALLOW_DOWNLOAD_ENV,
    ModelNotFoundError,
    load_model_and_tokenizer,
    pretrained_kwargs,
    resolve_model,
)

CACHED = "tiny-org/Tiny-Instruct"
TYPO = "tiny-org/Tiny-Instuct"
FAST_S = 2.0


@pytest.fixture(scope="module")
def hub_cache(tmp_path_factory) -> Path:
    """A Hugging Face hub cache holding one model, ``CACHED``."""
    cache = tmp_path_factory.mktemp("hf-cache")
    repo = cache / ("models--" + CACHED.replace("/", "--"))
    revision = "0123456789abcdef0123456789abcdef01234567"
    build_tiny_model(repo / "snapshots" / revision, hidden_size=32, layers=1)
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(revision)
    return cache


@pytest.fixture
def offline(hub_cache, monkeypatch) -> Path:
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(hub_cache))
    monkeypatch.delenv(ALLOW_DOWNLOAD_ENV, raising=False)
    return hub_cache


def agent_rl(capsys, *args: str) -> tuple[int, str, str, float]:
    capsys.readouterr()
    started = time.perf_counter()
    with pytest.raises(SystemExit) as exit_info:
        main(list(args))
    took = time.perf_counter() - started
    out, err = capsys.readouterr()
    return exit_info.value.code or 0, out, err, took


def test_an_unknown_name_fails_at_once_naming_where_it_looked(offline, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    started = time.perf_counter()
    with pytest.raises(ModelNotFoundError) as caught:
        load_model_and_tokenizer(TYPO)
    assert time.perf_counter() - started < FAST_S
    message = str(caught.value)
    assert str(tmp_path / TYPO) in message and str(offline) in message and "downloads are off" in message
    assert f"did you mean {CACHED!r}" in message
    assert "allow_download=True" in caught.value.hint and "AGENT_RL_ALLOW_DOWNLOAD=1" in caught.value.hint
    assert caught.value.looked_in == (str(tmp_path / TYPO), str(offline))


@pytest.mark.parametrize("command", [["train", "kto"], ["train", "grpo", "-r", "task_completion"], ["train", "gigpo"]])
def test_train_commands_fail_at_once_on_a_typo(offline, tmp_path, capsys, command):
    args = (*command, "-m", "Qwen/Qwen2.5-0.5B-Instuct", "--db", str(tmp_path / "none.duckdb"), "-o", str(tmp_path))
    agent_rl(capsys, *args)  # the first call imports the command's modules (seconds on a loaded machine): not timed
    code, _, err, took = agent_rl(capsys, *args)  # a hub lookup would cost every call ~1 min of retries
    assert took < FAST_S, f"{took:.1f} s"
    assert code == 1
    assert "Qwen/Qwen2.5-0.5B-Instuct" in err and str(offline) in err and "--allow-download" in err


def test_policy_serve_and_local_policy_fail_at_once_on_a_typo(offline, capsys):
    agent_rl(capsys, "policy", "serve", "-m", TYPO)  # imports: not timed
    code, _, err, took = agent_rl(capsys, "policy", "serve", "-m", TYPO)
    assert took < FAST_S and code == 1
    assert str(offline) in err and "--allow-download" in err and CACHED in err
    started = time.perf_counter()
    with pytest.raises(PolicyError, match="Hugging Face cache"):
        LocalPolicy(TYPO)
    assert time.perf_counter() - started < FAST_S


def test_a_cached_name_loads_offline(offline):
    assert resolve_model(CACHED) == CACHED
    started = time.perf_counter()
    model, tokenizer = load_model_and_tokenizer(CACHED)
    assert time.perf_counter() - started < 20  # no hub requests (without local_files_only they retry for ~1 min)
    assert model.config.num_hidden_layers == 1 and tokenizer.pad_token is not None
    policy = LocalPolicy(CACHED)
    assert policy.generate([{"role": "user", "content": "hi"}], max_new_tokens=2).token_ids


def test_downloads_are_opt_in(offline, tmp_path, capsys, monkeypatch):
    assert pretrained_kwargs()["local_files_only"] is True
    assert pretrained_kwargs(allow_download=True)["local_files_only"] is False
    assert resolve_model(TYPO, allow_download=True) == TYPO  # left to the hub, no request made here
    monkeypatch.setenv(ALLOW_DOWNLOAD_ENV, "1")
    assert resolve_model(TYPO) == TYPO and pretrained_kwargs()["local_files_only"] is False
    monkeypatch.delenv(ALLOW_DOWNLOAD_ENV)
    # --allow-download reaches the config: the model check passes, the missing database is the error
    code, _, err, _ = agent_rl(
        capsys, "train", "kto", "-m", TYPO, "--allow-download", "--db", str(tmp_path / "none.duckdb"), "-o", "x"
    )
    assert code == 1 and "none.duckdb" in err and "Hugging Face cache" not in err


def test_a_local_path_that_is_not_a_model_names_the_path(offline, tmp_path):
    with pytest.raises(ModelNotFoundError, match="does not exist") as caught:
        resolve_model(str(tmp_path / "missing" / "model"))
    assert str(tmp_path / "missing" / "model") in str(caught.value)
    (tmp_path / "empty").mkdir()
    with pytest.raises(ModelNotFoundError, match="no config.json"):
        resolve_model(str(tmp_path / "empty"))


def test_dataset_and_doctor_tokenizers_load_offline_too(offline, monkeypatch):
    """``dataset build --tokenizer`` and ``doctor --tokenizer`` load through the data layer's
    ``load_tokenizer``: offline by default too, so a typo asks no server (no name lookup at
    all) and the error names where it looked and how to allow downloads."""
    import socket

    from agent_rl_plugin.data import load_tokenizer
    from agent_rl_plugin.data.report import DatasetError

    lookups: list[str] = []

    def no_lookup(host, *args, **kwargs):
        lookups.append(str(host))
        raise OSError(f"no network in this test ({host})")

    monkeypatch.setattr(socket, "getaddrinfo", no_lookup)
    hub_mode = constants.HF_HUB_OFFLINE
    with pytest.raises(DatasetError) as caught:
        load_tokenizer(TYPO)
    assert lookups == []
    assert "offline" in str(caught.value) and str(offline) in str(caught.value)
    assert ALLOW_DOWNLOAD_ENV in caught.value.hint
    assert load_tokenizer(CACHED).name_or_path == CACHED and lookups == []
    assert constants.HF_HUB_OFFLINE == hub_mode  # the hub's own mode is put back
