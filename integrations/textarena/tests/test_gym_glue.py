"""TextArenaGym: the gymnasium-style view of a TextArena env that GymTextAdapter wraps (reset and
step signatures, rewards only at the end, the caller's random stream untouched, clear errors),
and the package's import costs (offline, no nltk download, the entry point never imports
textarena)."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest
import textarena as ta
from agent_rl_textarena import TextArenaGym, optimal_actions

from agent_rl_plugin.envs import EnvError

HERE = Path(__file__).parent


def test_reset_and_step_have_the_gymnasium_signatures():
    gym = TextArenaGym(ta.make("FrozenLake-v0-raw"))
    observation, info = gym.reset(seed=0)
    assert observation.startswith("Current Board:") and info["prompt"].startswith("Welcome to Frozen Lake!")
    path = optimal_actions(0)
    steps = [gym.step(word) for word in path]
    for _observation, reward, terminated, truncated, info in steps[:-1]:
        assert (reward, terminated, truncated) == (0.0, False, False)
        assert info["messages"][0].startswith("You moved ") and "textarena_reward" not in info
    observation, reward, terminated, truncated, info = steps[-1]
    assert (reward, terminated, truncated) == (1.0, True, False) and "P/G" in observation
    assert info["textarena_reward"] == 1.0 and info["invalid_move"] is False
    with pytest.raises(EnvError, match="game is over"):
        gym.step("up")


def test_actions_are_sent_in_textarena_format():
    game = ta.make("FrozenLake-v0-raw")
    gym = TextArenaGym(game)
    gym.reset(seed=0)
    gym.step("down")
    assert game.state.game_state["player_pos"] == (1, 0)
    assert (0, "[down]") in game.state.logs  # what TextArena parsed
    plain = TextArenaGym(ta.make("FrozenLake-v0-raw"), action_format="{}")
    plain.reset(seed=0)
    _obs, _reward, _done, _trunc, info = plain.step("down")  # unbracketed: TextArena rejects the format
    assert any("Invalid action format" in m for m in info["messages"])


def test_the_callers_random_stream_is_left_alone():
    random.seed(1234)
    expected = [random.random() for _ in range(5)]
    random.seed(1234)
    got = [random.random()]
    gym = TextArenaGym(ta.make("FrozenLake-v0-raw"))
    gym.reset(seed=0)  # TextArena seeds the global random module here
    got.append(random.random())
    gym.step("down")
    got.append(random.random())
    gym.reset(seed=None)
    got += [random.random(), random.random()]
    assert got == expected


def test_a_seedless_reset_continues_the_games_own_stream():
    def lakes(seed: int) -> list[str]:
        gym = TextArenaGym(ta.make("FrozenLake-v0-raw"))
        first = gym.reset(seed=seed)[0]
        return [first] + [gym.reset(seed=None)[0] for _ in range(3)]

    assert lakes(3) == lakes(3)  # reproducible after a seeded reset
    assert len(set(lakes(3))) > 1  # and a fresh lake each time


def test_bad_arguments_are_clear_errors():
    game = ta.make("FrozenLake-v0-raw")
    with pytest.raises(EnvError, match="unknown reward mode 'sparse'") as caught:
        TextArenaGym(game, reward="sparse")  # type: ignore[arg-type]
    assert "reward='win'" in caught.value.hint
    with pytest.raises(EnvError, match="no '{}'"):
        TextArenaGym(game, action_format="[up]")
    with pytest.raises(EnvError, match="never started"):
        TextArenaGym(game).step("up")


def run_offline(code: str, tmp_path: Path) -> dict:
    """Run ``code`` in a fresh interpreter whose sockets refuse to connect and whose home and
    nltk data paths are empty; ``code`` leaves its findings in the dict ``out``."""
    guard = (
        "import socket, json, sys\n"
        "attempts = []\n"
        "def connect(self, address):\n"
        "    attempts.append(repr(address)); raise OSError('offline test: no network')\n"
        "def getaddrinfo(host, *args, **kwargs):\n"
        "    attempts.append(repr(host)); raise OSError('offline test: no name lookups')\n"
        "socket.socket.connect = connect\n"
        "socket.getaddrinfo = getaddrinfo\n"
        "out = {}\n"
    )
    home = tmp_path / "home"
    home.mkdir()
    environ = {**os.environ, "HOME": str(home), "NLTK_DATA": str(tmp_path / "nltk_data")}
    script = guard + code + "\nout['attempts'] = attempts\nprint(json.dumps(out))"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=environ, cwd=HERE)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    out["home"] = sorted(p.name for p in home.iterdir())
    out["nltk_data"] = (tmp_path / "nltk_data").exists()
    return out


def test_textarena_plays_offline_without_downloading_nltk_data(tmp_path):
    out = run_offline(
        "from agent_rl_textarena import make_frozenlake, optimal_actions\n"
        "env = make_frozenlake(); env.reset(2)\n"
        "out['reward'] = [env.step(w) for w in optimal_actions(2)][-1].reward\n"
        "out['nltk_imported'] = 'nltk' in sys.modules\n",
        tmp_path,
    )
    assert out["reward"] == 1.0
    assert out["attempts"] == [] and out["home"] == [] and out["nltk_data"] is False
    assert out["nltk_imported"] is True  # textarena imports nltk, but fetches nothing for FrozenLake


def test_the_entry_point_and_the_package_do_not_import_textarena(tmp_path):
    out = run_offline(
        "import agent_rl_textarena.plugin, agent_rl_textarena\nout['textarena'] = 'textarena' in sys.modules\n",
        tmp_path,
    )
    assert out["textarena"] is False and out["attempts"] == []
