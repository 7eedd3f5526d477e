"""Built-in plugin: normalisers mapping other span conventions onto the canonical keys.

Implements ``agent_rl_register_normalizers``. On the store's write path (at ingest, in
:class:`~agent_rl_plugin.store.rows.SpanConverter`, before the attributes are encoded), each
span's attribute dict passes through these, so the views read one vocabulary (current GenAI
``gen_ai.*`` plus ``agent_rl.*``) whatever library produced the span:

* ``openinference`` (:mod:`.openinference`): OpenInference / Arize Phoenix spans;
* ``openllmetry`` (:mod:`.openllmetry`): Traceloop decorator spans and OpenLLMetry usage keys;
* ``genai`` (:mod:`.genai`): deprecated GenAI names (``gen_ai.system``, flattened
  ``gen_ai.prompt.N.*`` / ``gen_ai.completion.N.*``, ``gen_ai.usage.prompt_tokens``,
  ``llm.request.type``), as OpenLLMetry and older GenAI instrumentations write them.

They are registered in that order, which is their precedence (:mod:`.precedence`): present keys
are never overwritten, so ``agent_rl.*`` > current GenAI > OpenInference > OpenLLMetry /
deprecated GenAI. The original keys are kept, a span without any of a normaliser's keys costs
it a few dict look-ups, and bad values (invalid JSON, wrong types) are kept as they are or
wrapped as JSON strings, never raised on.
"""

from __future__ import annotations

from typing import Any, Callable

from agent_rl_plugin.hookspecs import hookimpl
from agent_rl_plugin.store.normalizers.genai import normalize_genai
from agent_rl_plugin.store.normalizers.openinference import normalize_openinference
from agent_rl_plugin.store.normalizers.openllmetry import normalize_openllmetry
from agent_rl_plugin.store.normalizers.precedence import BUILTIN_NORMALIZERS, normalize_all


@hookimpl
def agent_rl_register_normalizers(register: Callable[[str, Callable[[dict[str, Any], str], None]], None]) -> None:
    for name, normalize in BUILTIN_NORMALIZERS:
        register(name, normalize)


__all__ = [
    "BUILTIN_NORMALIZERS",
    "agent_rl_register_normalizers",
    "normalize_all",
    "normalize_genai",
    "normalize_openinference",
    "normalize_openllmetry",
]
