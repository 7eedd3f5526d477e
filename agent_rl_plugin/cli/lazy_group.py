"""The root group of ``agent-rl`` that imports a built-in command group only when it runs.

Importing every command module (training options, the receiver, reports, ...) costs most of a
second before any command starts. :class:`LazyGroup` lists the built-in commands from a static
table (:data:`agent_rl_plugin.cli.main.COMMAND_SUMMARIES`: name, plugin and the one-line help
``agent-rl --help`` shows), and imports a command's module only when the command is resolved
for running (or for its own ``--help``). ``tests/test_cli_startup.py`` checks that the table
equals what the real commands say, so it cannot go stale, and that a lazy app prints exactly
what the eager one does.

Contract:

* :meth:`LazyGroup.list_commands` gives the built-in names not registered for real first, in
  the table's order, then the commands registered on the group (outside plugins', in hook
  order), which is the order an eager app lists them in;
* :meth:`LazyGroup.get_command` gives a registered command, else a placeholder for a built-in
  (a plain command that carries only its name and one-line help, for listings), else ``None``;
  a registered command with a built-in's name wins as it would in an eager app, where Typer
  adds groups after plain commands: a plugin's plain command does not replace a built-in
  group (``train``, ``db``, ...), anything else does;
* :meth:`LazyGroup.resolve_command` (what running a command goes through) gives the real
  command: the placeholder is replaced by the command its module registers.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, Mapping

import typer
from typer.core import TyperCommand, TyperGroup

if TYPE_CHECKING:  # annotations only: typer >= 0.2x builds on its own copy of click, older typers on click
    from typer import _click


class LazyCommand(TyperCommand):
    """A built-in command not imported yet: its name and one-line help, for ``--help`` listings
    and completion. Never invoked: :meth:`LazyGroup.resolve_command` swaps in the real one."""

    def __init__(self, name: str, summary: str) -> None:
        super().__init__(name=name, help=summary)


def load_builtin(
    module_name: str, command_name: str, register_function: str = "agent_rl_register_commands"
) -> _click.Command:
    """The click command ``command_name`` as the module ``module_name`` registers it through its
    ``register_function`` (the ``agent_rl_register_commands`` hook by default) on a scratch Typer
    app, built as the group it belongs to would build it."""
    module = importlib.import_module(module_name)
    scratch = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
    getattr(module, register_function)(cli=scratch)
    group = typer.main.get_group(scratch)
    command = group.commands.get(command_name)
    if command is None:  # the table names a command the module does not register
        raise LookupError(f"{module_name} registers no command {command_name!r} (commands: {sorted(group.commands)})")
    return command


class LazyGroup(TyperGroup):
    """A :class:`~typer.core.TyperGroup` that also offers the commands of :attr:`lazy_commands`
    (name -> (module, one-line help)) without importing them: see the module contract. A
    subclass sets :attr:`lazy_commands` (``build_app(lazy=True)`` does; so does ``agent-rl
    train`` for its GRPO commands), :attr:`register_function` (what the modules call their
    registering function) and :attr:`lazy_first` (whether the lazy commands are listed before
    the registered ones).

    :attr:`commands`, read from outside (code that walks every command: the docs, the grammar
    tests), imports the lazy commands and holds them all; the group itself lists, resolves and
    prints help from its registered commands and the table, importing only what runs."""

    lazy_commands: Mapping[str, tuple[str, str]] = {}
    register_function: str = "agent_rl_register_commands"
    lazy_first: bool = True

    def __init__(self, **attrs: Any) -> None:
        self.registered: dict[str, _click.Command] = {}
        self.loaded: dict[str, _click.Command] = {}
        self._replaces: dict[str, bool] = {}
        super().__init__(**attrs)

    @property  # type: ignore[override]
    def commands(self) -> dict[str, _click.Command]:
        """Every command, the lazy ones imported now (registered ones win over the table)."""
        for name in self._pending():
            self.load(name)
        return {name: self._registered(name) or self.loaded[name] for name in self.list_commands(None)}

    @commands.setter
    def commands(self, value: Mapping[str, _click.Command]) -> None:
        self.registered = dict(value)

    def add_command(self, cmd: _click.Command, name: str | None = None) -> None:
        name = name or cmd.name
        if name is None:
            raise TypeError("Command has no name.")
        self.registered[name] = cmd
        self._replaces.pop(name, None)

    def _replaces_builtin(self, name: str) -> bool:
        """Whether the registered command ``name`` takes the place of the built-in of that name,
        as in an eager Typer app, which adds groups after plain commands (so a built-in group
        beats a plugin's plain command; otherwise the plugin's, registered later, wins). Only a
        clash of names imports the built-in, to learn whether it is a group."""
        answer = self._replaces.get(name)
        if answer is None:
            if name not in self.lazy_commands or _is_group(self.registered[name]):
                answer = True
            else:
                answer = not _is_group(self._load_builtin(name))
            self._replaces[name] = answer
        return answer

    def _registered(self, name: str) -> _click.Command | None:
        """The registered command ``name`` unless the built-in of that name wins over it."""
        command = self.registered.get(name)
        return command if command is not None and self._replaces_builtin(name) else None

    def _pending(self) -> list[str]:
        return [name for name in self.lazy_commands if self._registered(name) is None]

    def list_commands(self, ctx: _click.Context | None) -> list[str]:
        pending = self._pending()
        registered = [name for name in self.registered if self._replaces_builtin(name)]
        return pending + registered if self.lazy_first else registered + pending

    def get_command(self, ctx: _click.Context, cmd_name: str) -> _click.Command | None:
        command = self._registered(cmd_name) or self.loaded.get(cmd_name)
        if command is not None:
            return command
        entry = self.lazy_commands.get(cmd_name)
        return LazyCommand(cmd_name, entry[1]) if entry is not None else None

    def load(self, cmd_name: str) -> _click.Command:
        """The real command ``cmd_name`` (registered, or imported now from the table, once)."""
        command = self._registered(cmd_name) or self.loaded.get(cmd_name)
        return command if command is not None else self._load_builtin(cmd_name)

    def _load_builtin(self, cmd_name: str) -> _click.Command:
        command = self.loaded.get(cmd_name)
        if command is None:
            module = self.lazy_commands[cmd_name][0]
            command = self.loaded[cmd_name] = load_builtin(module, cmd_name, self.register_function)
        return command

    def resolve_command(
        self, ctx: _click.Context, args: list[str]
    ) -> tuple[str | None, _click.Command | None, list[str]]:
        # The base class resolves through get_command (a placeholder for a lazy command) and,
        # on a typo, suggests close names from commands (which imports the lazy ones: only then).
        name, command, rest = super().resolve_command(ctx, args)
        if isinstance(command, LazyCommand) and name is not None:
            command = self.load(name)
        return name, command, rest


def _is_group(command: Any) -> bool:
    return callable(getattr(command, "list_commands", None))


__all__ = ["LazyCommand", "LazyGroup", "load_builtin"]
