"""The loop makes the agent better: a tiny local LLM policy, trained in closed rounds on the
bundled grid, solves held-out starts it could not solve before (greedy, never trained on).

Three fixed seeds, each a fresh tiny model; the assertion is on the held-out curve itself, so
anything that breaks learning (advantages with the wrong sign, log-probs not reaching the
trainer, the adapter not reloaded, the adapter restarted every round) fails it.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from agent_rl_plugin.loop import LoopConfig, train_loop  # noqa: E402

#: The demo's settings (agent_rl_plugin/cli/demo.py DEMO_LOOP), fewer rounds when they suffice.
ROUNDS = 8


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_loop_raises_held_out_success_by_at_least_half(seed, tmp_path):
    torch.set_num_threads(1)
    result = train_loop(
        LoopConfig(env="grid", method="grpo", rounds=ROUNDS, group_size=8, seed=seed, output_dir=str(tmp_path)),
        progress=False,
    )
    curve = result.heldout_curve
    assert curve[0] <= 0.2, f"the untrained policy should be near chance, got {curve}"
    assert curve[-1] - curve[0] >= 0.5, f"held-out success per round: {curve}"
    assert all(r.status == "done" for r in result.rounds), [r.details for r in result.rounds]
