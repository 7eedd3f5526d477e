"""Grid environments: :class:`GridWorld` (reach the goal) and :class:`KeyDoor` (key, then door).

Rows and columns count from 0; row 0 is the top, so ``up`` lowers the row and ``left`` lowers
the column. Moving off the grid or into a wall leaves the agent where it is (a valid step all the
same). Observations are plain sentences that are a function of the state alone.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Hashable
from typing import Any, Generic, TypeVar

from agent_rl_plugin.envs.base import EnvError, StepResult

__all__ = ["GridWorld", "KeyDoor"]

Cell = tuple[int, int]
S = TypeVar("S", bound=Hashable)

_MOVES: dict[str, Cell] = {"up": (-1, 0), "down": (1, 0), "left": (0, -1), "right": (0, 1)}


def _at(cell: Cell) -> str:
    return f"row {cell[0]}, column {cell[1]}"


class _GridEnv(ABC, Generic[S]):
    """What both grids share: moves, walls, the step budget, invalid actions, solving."""

    name: str = ""
    size: int = 0
    walls: frozenset[Cell] = frozenset()
    actions: tuple[str, ...] = tuple(_MOVES)
    max_steps: int = 0
    train_starts: tuple[Cell, ...] = ()
    heldout_starts: tuple[Cell, ...] = ()

    def __init__(self) -> None:
        self._state: S = self._initial(self.train_starts[0])
        self._steps = 0
        self._done = False

    # What each grid defines.
    @abstractmethod
    def _initial(self, cell: Cell) -> S: ...

    @abstractmethod
    def _enter(self, state: S, cell: Cell) -> tuple[S, float, bool, dict[str, Any]]:
        """The state after moving to ``cell``, the reward, whether the goal is reached, info."""
        ...

    @abstractmethod
    def _describe(self, state: S) -> str: ...

    @abstractmethod
    def _key(self, state: S) -> str: ...

    @abstractmethod
    def _cell(self, state: S) -> Cell: ...

    @abstractmethod
    def _terminal_cells(self) -> frozenset[Cell]: ...

    # The protocol.
    def reset(self, start: Hashable | None = None) -> str:
        """Start an episode at cell ``start`` (``(row, column)``; ``None``: the first training start)."""
        cell = self.train_starts[0] if start is None else self._check_start(start)
        self._state = self._initial(cell)
        self._steps = 0
        self._done = False
        return self._describe(self._state)

    def step(self, action: str) -> StepResult:
        """Apply one action word (case and surrounding spaces are ignored)."""
        if self._done:
            raise EnvError(f"the {self.name} episode is over", "call reset() to start a new episode")
        self._steps += 1
        word = action.strip().lower() if isinstance(action, str) else ""
        invalid = word not in _MOVES
        extra: dict[str, Any] = {}
        reward, goal = 0.0, False
        if not invalid:
            self._state, reward, goal, extra = self._transition(self._state, word)
        truncated = not goal and self._steps >= self.max_steps
        self._done = goal or truncated
        info = {"invalid": invalid, "truncated": truncated, "step": self._steps, **extra}
        return StepResult(self._describe(self._state), reward, self._done, info)

    def state_key(self) -> str:
        """A stable id of the current state, e.g. ``"gridworld:r2c3"``."""
        return self._key(self._state)

    # Solving (for tests and for checking a policy against the best possible).
    def optimal_actions(self, start: Hashable | None = None) -> tuple[str, ...]:
        """A shortest action sequence from ``start`` to the reward (breadth-first search)."""
        first = self._initial(self.train_starts[0] if start is None else self._check_start(start))
        paths: dict[S, tuple[str, ...]] = {first: ()}
        queue: deque[S] = deque([first])
        while queue:
            state = queue.popleft()
            for action in self.actions:
                after, reward, goal, _ = self._transition(state, action)
                if goal and reward > 0:
                    return (*paths[state], action)
                if after not in paths:
                    paths[after] = (*paths[state], action)
                    queue.append(after)
        raise EnvError(f"no start {start!r} of {self.name} can reach its goal")  # pragma: no cover

    def shortest_path_length(self, start: Hashable | None = None) -> int:
        """The fewest steps from ``start`` to the reward."""
        return len(self.optimal_actions(start))

    # Shared mechanics.
    def _transition(self, state: S, action: str) -> tuple[S, float, bool, dict[str, Any]]:
        row, col = self._cell(state)
        d_row, d_col = _MOVES[action]
        target = (row + d_row, col + d_col)
        if not (0 <= target[0] < self.size and 0 <= target[1] < self.size) or target in self.walls:
            target = (row, col)
        return self._enter(state, target)

    def _check_start(self, start: Hashable) -> Cell:
        ok = (
            isinstance(start, tuple)
            and len(start) == 2
            and all(isinstance(v, int) and 0 <= v < self.size for v in start)
            and start not in self.walls
            and start not in self._terminal_cells()
        )
        if not ok:
            raise EnvError(
                f"{start!r} is not a start cell of {self.name}: a start is a free (row, column) "
                f"of its {self.size}x{self.size} grid, not a wall, goal, key or door",
                "use one of the environment's train_starts or heldout_starts",
            )
        return (start[0], start[1])  # type: ignore[index]


class GridWorld(_GridEnv[Cell]):
    """A 4x4 grid with the goal in the top-left corner, at most 8 steps.

    Reward 1.0 on the step that reaches the goal (the episode ends), else 0.0. The 15 cells
    other than the goal are the starts: 10 for training, 5 held out.
    """

    name = "gridworld"
    size = 4
    max_steps = 8
    goal: Cell = (0, 0)
    train_starts = ((0, 1), (0, 3), (1, 0), (1, 1), (1, 2), (2, 0), (2, 2), (2, 3), (3, 1), (3, 2))
    heldout_starts = ((0, 2), (1, 3), (2, 1), (3, 0), (3, 3))

    def _initial(self, cell: Cell) -> Cell:
        return cell

    def _enter(self, state: Cell, cell: Cell) -> tuple[Cell, float, bool, dict[str, Any]]:
        goal = cell == self.goal
        return cell, 1.0 if goal else 0.0, goal, {}

    def _describe(self, state: Cell) -> str:
        text = f"You are at {_at(state)}. The goal is at {_at(self.goal)}."
        return text + " You reached the goal." if state == self.goal else text

    def _key(self, state: Cell) -> str:
        return f"{self.name}:r{state[0]}c{state[1]}"

    def _cell(self, state: Cell) -> Cell:
        return state

    def _terminal_cells(self) -> frozenset[Cell]:
        return frozenset({self.goal})


KeyState = tuple[Cell, bool]


class KeyDoor(_GridEnv[KeyState]):
    """A 5x5 room: pick up the key (automatic on arrival), then reach the door; at most 16 steps.

    A wall fills row 2 from column 1 to column 3, so the way between the key (bottom-left) and
    the door (top-right) runs along an edge. Reward 1.0 only on the step that reaches the door
    holding the key (the episode ends); standing on the door without the key does nothing. The
    state is the cell and whether the key is held, so states recur across episodes (GiGPO's step
    groups). 20 free cells are starts: 10 for training, 5 held out.

    ``key_reward``: a reward paid on the step that picks up the key (default 0.0: the reward is
    sparse). A uniformly random policy reaches the door holding the key in about 0.05% of
    episodes from the training starts (and picks up the key in about 20%), so a learner starting
    from scratch needs this partial credit to get any signal; the training loop's ``keydoor``
    uses 0.5. Success is still reaching the door with the key (the episode ends there).
    """

    name = "keydoor"
    size = 5
    max_steps = 16
    key: Cell = (4, 0)
    door: Cell = (0, 4)
    walls = frozenset({(2, 1), (2, 2), (2, 3)})
    train_starts = ((0, 0), (0, 2), (1, 1), (1, 3), (2, 0), (2, 4), (3, 1), (3, 3), (4, 2), (4, 4))
    heldout_starts = ((0, 3), (1, 0), (1, 4), (3, 2), (4, 3))

    def __init__(self, key_reward: float = 0.0) -> None:
        if isinstance(key_reward, bool) or not isinstance(key_reward, (int, float)) or not 0 <= key_reward < 1:
            raise EnvError(f"key_reward must be a number in [0, 1), got {key_reward!r}")
        self.key_reward = float(key_reward)
        super().__init__()

    def _initial(self, cell: Cell) -> KeyState:
        return (cell, False)

    def _enter(self, state: KeyState, cell: Cell) -> tuple[KeyState, float, bool, dict[str, Any]]:
        had_key = state[1]
        has_key = had_key or cell == self.key
        info: dict[str, Any] = {}
        if has_key and not had_key:
            info["picked_key"] = True
        if cell == self.door and not has_key:
            info["door_locked"] = True
        goal = cell == self.door and has_key
        reward = 1.0 if goal else self.key_reward if info.get("picked_key") else 0.0
        return (cell, has_key), reward, goal, info

    def _describe(self, state: KeyState) -> str:
        cell, has_key = state
        holding = "You have the key." if has_key else f"You do not have the key. The key is at {_at(self.key)}."
        text = (
            f"You are at {_at(cell)}. {holding} The door is at {_at(self.door)}. "
            "A wall fills row 2 from column 1 to column 3."
        )
        return text + " You opened the door." if has_key and cell == self.door else text

    def _key(self, state: KeyState) -> str:
        cell, has_key = state
        return f"{self.name}:r{cell[0]}c{cell[1]}:{'key' if has_key else 'nokey'}"

    def _cell(self, state: KeyState) -> Cell:
        return state[0]

    def _terminal_cells(self) -> frozenset[Cell]:
        return frozenset({self.key, self.door})
