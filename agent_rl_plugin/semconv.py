"""Pinned attribute, span and event names.

Two families live here:

* ``gen_ai.*``: the OpenTelemetry GenAI semantic conventions. The Python constants in
  ``opentelemetry-semantic-conventions`` are marked incubating/deprecated and move between
  releases, so the names we rely on are pinned here once.
* ``agent_rl.*``: this project's own keys (rollout, task, group, step, coordination events).

Every module that writes or reads span attributes imports its names from this file; the SQL
views in :mod:`agent_rl_plugin.store.views` use the same strings.
"""

from __future__ import annotations

from typing import Final

# --- GenAI semantic conventions -----------------------------------------------------------
GEN_AI_OPERATION_NAME: Final = "gen_ai.operation.name"
GEN_AI_PROVIDER_NAME: Final = "gen_ai.provider.name"
GEN_AI_SYSTEM: Final = "gen_ai.system"  # older name of gen_ai.provider.name
GEN_AI_AGENT_NAME: Final = "gen_ai.agent.name"
GEN_AI_AGENT_ID: Final = "gen_ai.agent.id"
GEN_AI_CONVERSATION_ID: Final = "gen_ai.conversation.id"
GEN_AI_REQUEST_MODEL: Final = "gen_ai.request.model"
GEN_AI_RESPONSE_MODEL: Final = "gen_ai.response.model"
GEN_AI_RESPONSE_ID: Final = "gen_ai.response.id"
GEN_AI_RESPONSE_FINISH_REASONS: Final = "gen_ai.response.finish_reasons"
GEN_AI_REQUEST_TEMPERATURE: Final = "gen_ai.request.temperature"
GEN_AI_USAGE_INPUT_TOKENS: Final = "gen_ai.usage.input_tokens"
GEN_AI_USAGE_OUTPUT_TOKENS: Final = "gen_ai.usage.output_tokens"
GEN_AI_INPUT_MESSAGES: Final = "gen_ai.input.messages"  # JSON string
GEN_AI_OUTPUT_MESSAGES: Final = "gen_ai.output.messages"  # JSON string
GEN_AI_SYSTEM_INSTRUCTIONS: Final = "gen_ai.system_instructions"  # JSON string
GEN_AI_TOOL_NAME: Final = "gen_ai.tool.name"
GEN_AI_TOOL_TYPE: Final = "gen_ai.tool.type"
GEN_AI_TOOL_DESCRIPTION: Final = "gen_ai.tool.description"
GEN_AI_TOOL_CALL_ID: Final = "gen_ai.tool.call.id"
GEN_AI_TOOL_CALL_ARGUMENTS: Final = "gen_ai.tool.call.arguments"  # JSON string
GEN_AI_TOOL_CALL_RESULT: Final = "gen_ai.tool.call.result"  # JSON string
ERROR_TYPE: Final = "error.type"

# gen_ai.operation.name values
OP_INVOKE_AGENT: Final = "invoke_agent"
OP_CHAT: Final = "chat"
OP_TEXT_COMPLETION: Final = "text_completion"
OP_GENERATE_CONTENT: Final = "generate_content"
OP_EXECUTE_TOOL: Final = "execute_tool"
LLM_OPERATIONS: Final = (OP_CHAT, OP_TEXT_COMPLETION, OP_GENERATE_CONTENT)

# The evaluation event (rewards)
EVENT_EVALUATION_RESULT: Final = "gen_ai.evaluation.result"
GEN_AI_EVALUATION_NAME: Final = "gen_ai.evaluation.name"
GEN_AI_EVALUATION_SCORE_VALUE: Final = "gen_ai.evaluation.score.value"
GEN_AI_EVALUATION_SCORE_LABEL: Final = "gen_ai.evaluation.score.label"
GEN_AI_EVALUATION_EXPLANATION: Final = "gen_ai.evaluation.explanation"

# --- agent_rl.* (ours) --------------------------------------------------------------------
ROLLOUT_ID: Final = "agent_rl.rollout.id"
TASK_ID: Final = "agent_rl.task.id"
GROUP_ID: Final = "agent_rl.group.id"
ROLLOUT_METADATA: Final = "agent_rl.rollout.metadata"  # JSON string
ROLLOUT_INPUT: Final = "agent_rl.input"  # JSON string: arguments of an agent call
ROLLOUT_OUTPUT: Final = "agent_rl.output"  # JSON string: return value / streamed output
ROLLOUT_ROOT: Final = "agent_rl.rollout.root"  # true on the span that is the rollout's root
SPAN_KIND: Final = "agent_rl.span.kind"  # one of the SPAN_KIND_* values below
STEP_INDEX: Final = "agent_rl.step.index"
STATE_KEY: Final = "agent_rl.state.key"  # GiGPO state key of an LLM step (the steps view's state_key)
LOGPROBS: Final = "agent_rl.logprobs"  # JSON list of floats: behaviour log-probs of the sampled output tokens
TOKEN_IDS: Final = "agent_rl.token_ids"  # JSON list of ints: the sampled output token ids (content)
OP_CLIENT_REQUEST: Final = "client_request"  # an SDK's own span of a call that client capture recorded
COVERED: Final = "agent_rl.covered"  # set on another tracer's span that describes an LLM call already recorded
COVERED_OPERATION: Final = "agent_rl.covered.operation"  # that span's original gen_ai.operation.name
LLM_INCOMPLETE: Final = (
    "agent_rl.llm.incomplete"  # true: a streamed answer the agent stopped reading before its end (cut text)
)
PROMPT_TOKEN_IDS: Final = (
    "agent_rl.prompt_token_ids"  # JSON list of ints: the prompt's token ids as the server saw them (content)
)
POLICY_VERSION: Final = "agent_rl.policy.version"  # the policy (model + adapter) version that answered an LLM call
AGENT_ROLE: Final = "agent_rl.agent.role"  # "agent" | "orchestrator"
STREAM_CHUNKS: Final = "agent_rl.stream.chunks"  # number of chunks a stream yielded
STREAM_OUTCOME: Final = "agent_rl.stream.outcome"  # exhausted | closed | error | collected
CANCELLED: Final = "agent_rl.cancelled"  # true when the call was cancelled
REASONING: Final = "agent_rl.reasoning"  # reasoning text of an LLM turn

SPAN_KIND_ROLLOUT: Final = "rollout"
SPAN_KIND_AGENT: Final = "agent"
SPAN_KIND_LLM: Final = "llm"
SPAN_KIND_TOOL: Final = "tool"
SPAN_KIND_EVENT: Final = "event"
SPAN_KIND_REWARD: Final = "reward"

# Coordination / agent events: recorded as span events named EVENT_NAME.
EVENT_NAME: Final = "agent_rl.event"
EVENT_TYPE: Final = "agent_rl.event.type"
EVENT_ROUND: Final = "agent_rl.event.round"
EVENT_AGENT_ID: Final = "agent_rl.event.agent_id"
EVENT_TARGET: Final = "agent_rl.event.target"
EVENT_REASON: Final = "agent_rl.event.reason"
EVENT_CONTENT: Final = "agent_rl.event.content"
EVENT_DATA: Final = "agent_rl.event.data"  # JSON string of any extra fields

EVENT_TYPE_NEW_ANSWER: Final = "new_answer"
EVENT_TYPE_VOTE: Final = "vote"
EVENT_TYPE_RESTART: Final = "restart"
EVENT_TYPE_FINAL_ANSWER: Final = "final_answer"
EVENT_TYPE_REASONING: Final = "reasoning"

# Reward-specific keys carried on the gen_ai.evaluation.result event.
REWARD_STEP_INDEX: Final = STEP_INDEX
REWARD_METADATA: Final = "agent_rl.reward.metadata"  # JSON string
REWARD_SOURCE: Final = "agent_rl.reward.source"  # emitted | code | llm | human

# Marker appended to a value cut to the configured maximum size.
TRUNCATION_MARKER: Final = "...[truncated {original} bytes]"
