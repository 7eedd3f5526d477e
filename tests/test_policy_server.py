"""The OpenAI-compatible policy server: real HTTP on 127.0.0.1 over a real tiny model. Answers
carry the policy's own token ids and log-probs, choice constraints hold, adapters swap at run
time (and only from under the adapter root), and bad or hostile requests get OpenAI-shaped
errors without ever stopping the server."""

from __future__ import annotations

import http.client
import json
import os
import queue
import re
import signal
import socket
import subprocess
import sys
import threading
import urllib.parse
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from agent_rl_plugin.policy import LocalPolicy  # noqa: E402
from agent_rl_plugin.policy.client import PolicyClient, PolicyClientError  # noqa: E402
from agent_rl_plugin.policy.server import PolicyServer, PolicyServerConfigError  # noqa: E402
from agent_rl_plugin.train.tiny import build_tiny_model  # noqa: E402

ACTIONS = ["up", "down", "left", "right"]
MESSAGES = [{"role": "user", "content": "You are at row 2, column 3. The goal is at row 0, column 0."}]
KEY = "k3y-for-tests"


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    torch.set_num_threads(1)
    return build_tiny_model(
        tmp_path_factory.mktemp("policy-server") / "tiny",
        hidden_size=32,
        layers=1,
        vocab_texts=["\n".join(ACTIONS)] * 20,
    )


@pytest.fixture(scope="module")
def policy(model_dir):
    return LocalPolicy(model_dir, seed=0)


@pytest.fixture
def base_policy(policy):
    """The shared policy, back on the base model after each test."""
    policy.load_adapter(None)
    yield policy
    policy.load_adapter(None)


def save_adapter(model_dir, path: Path, scale: float, seed: int) -> str:
    """A LoRA adapter with random (non-zero) weights: it changes the model's answers."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    model = get_peft_model(
        AutoModelForCausalLM.from_pretrained(model_dir),
        LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"]),
    )
    with torch.no_grad():
        for name, weight in model.named_parameters():
            if "lora_" in name:
                weight.normal_(0.0, scale)
    model.save_pretrained(path)
    return str(path)


@pytest.fixture(scope="module")
def adapters(model_dir, tmp_path_factory):
    base = tmp_path_factory.mktemp("adapters")
    root = base / "runs"
    one = save_adapter(model_dir, root / "round-1" / "adapter", 1.0, seed=1)
    two = save_adapter(model_dir, root / "round-2" / "adapter", 1.5, seed=2)
    outside = save_adapter(model_dir, base / "elsewhere" / "adapter", 1.0, seed=3)
    (root / "sneaky").symlink_to(Path(outside), target_is_directory=True)
    return {"root": root, "one": one, "two": two, "outside": outside}


def request(url, method, path, body=None, headers=None, raw=None):
    """(status, headers, JSON or text) of one request on a fresh connection."""
    parts = urllib.parse.urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
    data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
    sent = {"Content-Type": "application/json"} if data is not None else {}
    sent.update(headers or {})
    try:
        connection.request(method, path, body=data, headers=sent)
        response = connection.getresponse()
        text = response.read().decode()
        kind = response.getheader("Content-Type", "")
        return response.status, response, json.loads(text) if kind.startswith("application/json") else text
    finally:
        connection.close()


def chat(url, headers=None, **fields):
    body = {"messages": MESSAGES, **fields}
    return request(url, "POST", "/v1/chat/completions", body, headers)


def assert_error(status, answer, code):
    assert status == code, answer
    assert set(answer["error"]) >= {"message", "type", "code"} and answer["error"]["code"] == code
    assert "Traceback" not in json.dumps(answer)
    return answer["error"]["message"]


def test_a_greedy_answer_carries_the_policys_own_token_ids_and_logprobs(base_policy):
    expected = base_policy.generate(MESSAGES, greedy=True, max_new_tokens=6)
    with PolicyServer(base_policy) as server:
        status, _, answer = chat(
            server.url, model=server.model_name, temperature=0, max_tokens=6, logprobs=True, return_token_ids=True
        )
    assert status == 200, answer
    assert answer["object"] == "chat.completion" and answer["id"].startswith("chatcmpl-")
    assert answer["model"] == server.model_name
    choice = answer["choices"][0]
    assert choice["message"] == {"role": "assistant", "content": expected.text, "tool_calls": []}
    assert choice["finish_reason"] == expected.finish_reason
    assert choice["token_ids"] == expected.token_ids and answer["prompt_token_ids"] == expected.prompt_ids
    content = choice["logprobs"]["content"]
    assert [entry["logprob"] for entry in content] == expected.logprobs  # exact: JSON keeps every digit
    tokenizer = base_policy.tokenizer
    assert [entry["token"] for entry in content] == [tokenizer.decode([t]) for t in expected.token_ids]
    assert all(entry["bytes"] == list(entry["token"].encode()) and entry["top_logprobs"] == [] for entry in content)
    assert answer["usage"] == {
        "prompt_tokens": len(expected.prompt_ids),
        "completion_tokens": len(expected.token_ids),
        "total_tokens": len(expected.prompt_ids) + len(expected.token_ids),
    }
    assert answer["agent_rl_policy_version"] == answer["system_fingerprint"] == "base"


def test_choice_constraints_allow_only_the_choices_in_both_vllm_forms(base_policy):
    with PolicyServer(base_policy) as server:
        seen = []
        for i in range(30):
            form = {"structured_outputs": {"choice": ACTIONS}} if i % 2 else {"guided_choice": ACTIONS}
            status, _, answer = chat(server.url, temperature=3.0, max_tokens=8, **form)
            assert status == 200, answer
            seen.append(answer["choices"][0]["message"]["content"])
        free = [
            chat(server.url, temperature=1.0, max_tokens=4)[2]["choices"][0]["message"]["content"] for _ in range(4)
        ]
        status, _, greedy = chat(server.url, temperature=0, logprobs=True, structured_outputs={"choice": ACTIONS})
    assert set(seen) <= set(ACTIONS) and len(set(seen)) >= 2, seen
    assert not set(free) <= set(ACTIONS)  # without the constraint the tiny model says other things
    expected = base_policy.generate(MESSAGES, choices=ACTIONS, greedy=True)
    assert greedy["choices"][0]["message"]["content"] == expected.text
    assert [e["logprob"] for e in greedy["choices"][0]["logprobs"]["content"]] == expected.logprobs


def test_adapters_hot_swap_at_run_time_and_unloading_restores_the_base(base_policy, model_dir, adapters):
    base = base_policy.generate(MESSAGES, greedy=True, max_new_tokens=6)
    with PolicyServer(base_policy, adapter_root=adapters["root"]) as server:
        status, response, text = request(
            server.url, "POST", "/v1/load_lora_adapter", {"lora_name": "policy", "lora_path": adapters["one"]}
        )
        assert status == 200 and text == "Success: LoRA adapter 'policy' added successfully."
        version = response.getheader("X-Agent-RL-Policy-Version")
        assert re.fullmatch(r"round-1/adapter#\d+", version) and version == base_policy.version
        status, _, tuned = chat(server.url, model="policy", temperature=0, max_tokens=6, logprobs=True)
        assert status == 200 and tuned["agent_rl_policy_version"] == version and tuned["model"] == "policy"
        reference = LocalPolicy(model_dir, adapter=adapters["one"]).generate(MESSAGES, greedy=True, max_new_tokens=6)
        assert tuned["choices"][0]["message"]["content"] == reference.text
        tuned_logprobs = [e["logprob"] for e in tuned["choices"][0]["logprobs"]["content"]]
        assert tuned_logprobs == pytest.approx(reference.logprobs, abs=1e-5)
        assert tuned_logprobs != pytest.approx(base.logprobs, abs=1e-3)
        assert [m["id"] for m in request(server.url, "GET", "/v1/models")[2]["data"]] == [server.model_name, "policy"]
        # one set of weights at a time: the base is refused while the adapter is loaded
        assert "unload" in assert_error(*chat(server.url, model=server.model_name)[::2], 409)
        # the same name again needs load_inplace (vLLM's rule); relative paths are under the root
        again = {"lora_name": "policy", "lora_path": "round-2/adapter"}
        assert_error(*request(server.url, "POST", "/v1/load_lora_adapter", again)[::2], 400)
        status, response, _ = request(server.url, "POST", "/v1/load_lora_adapter", {**again, "load_inplace": True})
        assert status == 200 and re.fullmatch(r"round-2/adapter#\d+", response.getheader("X-Agent-RL-Policy-Version"))
        second = chat(server.url, model="policy", temperature=0, max_tokens=6, logprobs=True)[2]
        second_logprobs = [e["logprob"] for e in second["choices"][0]["logprobs"]["content"]]
        assert second_logprobs != pytest.approx(tuned_logprobs, abs=1e-3)
        assert_error(*request(server.url, "POST", "/v1/unload_lora_adapter", {"lora_name": "other"})[::2], 404)
        status, _, text = request(server.url, "POST", "/v1/unload_lora_adapter", {"lora_name": "policy"})
        assert status == 200 and "removed" in text
        status, _, back = chat(server.url, model=server.model_name, temperature=0, max_tokens=6, logprobs=True)
        assert_error(*chat(server.url, model="policy")[::2], 404)
    assert back["agent_rl_policy_version"] == "base"
    assert back["choices"][0]["message"]["content"] == base.text
    assert [e["logprob"] for e in back["choices"][0]["logprobs"]["content"]] == pytest.approx(base.logprobs, abs=1e-5)


def test_adapters_load_only_from_under_the_adapter_root(base_policy, adapters, tmp_path):
    load = "/v1/load_lora_adapter"
    with PolicyServer(base_policy) as closed:
        message = assert_error(
            *request(closed.url, "POST", load, {"lora_name": "p", "lora_path": adapters["one"]})[::2], 403
        )
        assert "--adapter-root" in message
    with PolicyServer(base_policy, adapter_root=adapters["root"]) as server:
        for path in (adapters["outside"], "../elsewhere/adapter", "sneaky", str(adapters["root"] / "sneaky")):
            assert_error(*request(server.url, "POST", load, {"lora_name": "p", "lora_path": path})[::2], 403)
        assert base_policy.version == "base"
        assert_error(*request(server.url, "POST", load, {"lora_name": "p", "lora_path": "missing"})[::2], 400)
        assert_error(
            *request(server.url, "POST", load, {"lora_name": "bad name!", "lora_path": "round-1/adapter"})[::2], 400
        )
        assert_error(
            *request(server.url, "POST", load, {"lora_name": server.model_name, "lora_path": "round-1/adapter"})[::2],
            400,
        )
    with pytest.raises(PolicyServerConfigError, match="not a folder"):
        PolicyServer(base_policy, adapter_root=tmp_path / "nope")
    with pytest.raises(PolicyServerConfigError, match="adapter_name"):
        PolicyServer(base_policy, adapter_name="two words")


def test_the_api_key_is_required_when_set_and_public_hosts_need_one(base_policy):
    with PolicyServer(base_policy, api_key=KEY) as server:
        assert_error(*chat(server.url)[::2], 401)
        assert_error(*chat(server.url, headers={"Authorization": "Bearer wrong"})[::2], 401)
        assert_error(*request(server.url, "GET", "/v1/models", headers={"Authorization": f"Basic {KEY}"})[::2], 401)
        assert chat(server.url, headers={"Authorization": f"Bearer {KEY}"}, max_tokens=2)[0] == 200
        assert request(server.url, "GET", "/health")[0] == 200
        # a web page's request (DNS rebinding, cross-site) is refused even with the key
        forged = {"Authorization": f"Bearer {KEY}", "Host": "evil.example:80"}
        assert_error(*request(server.url, "GET", "/v1/models", headers=forged)[::2], 403)
    with pytest.raises(PolicyServerConfigError, match="beyond loopback"):
        PolicyServer(base_policy, host="0.0.0.0")
    PolicyServer(base_policy, host="0.0.0.0", api_key=KEY)  # allowed with a key (not started)


def test_bad_requests_get_openai_errors_and_the_server_keeps_serving(base_policy):
    with PolicyServer(base_policy, max_body_bytes=4096) as server:
        post = "/v1/chat/completions"
        assert_error(*request(server.url, "POST", post, raw=b"x" * 10_000)[::2], 413)
        assert_error(*request(server.url, "POST", post, raw=b"{not json")[::2], 400)
        assert_error(*request(server.url, "POST", post, raw=b"[1, 2]")[::2], 400)
        assert_error(*request(server.url, "POST", post, raw=b"{}", headers={"Content-Type": "text/plain"})[::2], 415)
        bad = [
            {"n": 2},
            {"stream": True},
            {"temperature": -1},
            {"temperature": "hot"},
            {"max_tokens": 0},
            {"max_tokens": 1000},  # the prompt plus 1000 tokens exceed the tiny model's 1024 positions
            {"top_logprobs": 2, "logprobs": True},
            {"structured_outputs": {"json": {"type": "object"}}},
            {"structured_outputs": {"choice": []}},
            {"guided_regex": "up|down"},
            {"guided_choice": ["up"], "structured_outputs": {"choice": ["down"]}},
            {"stop": ["\n"]},
            {"top_p": 0.5},
            {"messages": []},
            {"messages": [{"role": "wizard", "content": "hi"}]},
            {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]},
        ]
        for fields in bad:
            message = assert_error(*request(server.url, "POST", post, {"messages": MESSAGES, **fields})[::2], 400)
            assert message, fields
        assert_error(*chat(server.url, model="no-such-model")[::2], 404)
        assert_error(*request(server.url, "GET", "/v1/nothing")[::2], 404)
        assert_error(*request(server.url, "GET", post)[::2], 405)
        assert_error(*request(server.url, "PUT", post, {})[::2], 501)
        with socket.create_connection(("127.0.0.1", server.port), timeout=30) as raw:  # not HTTP at all
            raw.sendall(b'GET /v1/"models extra HTTP/1.1\r\n\r\n')
            reply = raw.makefile("rb").read().decode()
        head, _, text = reply.partition("\r\n\r\n")
        assert head.startswith("HTTP/1.") and " 400 " in head.splitlines()[0]
        assert_error(400, json.loads(text), 400)
        # neutral values of unsupported knobs, unknown fields and text parts are fine
        fine = {"top_p": 1, "presence_penalty": 0, "user": "me", "seed": 3, "n": 1, "stream": False}
        parts = [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]
        assert request(server.url, "POST", post, {"messages": parts, "max_tokens": 2, **fine})[0] == 200


def test_an_unexpected_failure_is_a_500_without_details(base_policy, monkeypatch):
    def explode(*args, **kwargs):
        raise RuntimeError("secret detail /home/someone")

    with PolicyServer(base_policy) as server:
        monkeypatch.setattr(base_policy, "generate", explode)
        status, _, answer = chat(server.url)
        message = assert_error(status, answer, 500)
        assert "secret" not in json.dumps(answer) and "log" in message
        monkeypatch.undo()
        assert chat(server.url, max_tokens=2)[0] == 200


def test_a_seed_repeats_a_sample(base_policy):
    with PolicyServer(base_policy) as server:
        answers = [chat(server.url, seed=s, max_tokens=8, temperature=1.5, return_token_ids=True)[2] for s in (5, 6, 5)]
    ids = [a["choices"][0]["token_ids"] for a in answers]
    assert ids[0] == ids[2] and ids[0] != ids[1]


def test_concurrent_requests_are_all_answered(base_policy):
    with PolicyServer(base_policy) as server:
        results: list[int] = []

        def one():
            results.append(chat(server.url, structured_outputs={"choice": ACTIONS})[0])

        threads = [threading.Thread(target=one) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
    assert results == [200] * 8


def test_the_client_returns_generations_and_swaps_adapters(base_policy, adapters):
    with PolicyServer(base_policy, adapter_root=adapters["root"], api_key=KEY) as server:
        client = PolicyClient(server.url + "/v1", api_key=KEY)
        answer = client.chat(MESSAGES, choices=ACTIONS, greedy=True)
        expected = base_policy.generate(MESSAGES, choices=ACTIONS, greedy=True)
        assert answer == expected  # text, ids, log-probs, prompt ids, finish reason, version
        version = client.load_adapter("policy", adapters["one"])
        assert re.fullmatch(r"round-1/adapter#\d+", version)
        tuned = client.chat(MESSAGES, greedy=True, max_tokens=4, model="policy")
        assert tuned.version == version == base_policy.version
        assert client.chat(MESSAGES, greedy=True, max_tokens=4).version == tuned.version  # no model: current weights
        assert [m["id"] for m in client.models()] == [server.model_name, "policy"]
        assert client.unload_adapter("policy") == "base"
        with pytest.raises(PolicyClientError) as refused:
            client.load_adapter("policy", adapters["outside"])
        assert refused.value.status == 403
        with pytest.raises(PolicyClientError) as unauthorised:
            PolicyClient(server.url).chat(MESSAGES)
        assert unauthorised.value.status == 401
    with pytest.raises(PolicyClientError, match="no policy server answers") as gone:
        client.chat(MESSAGES)
    assert gone.value.status is None


def test_the_openai_sdk_talks_to_it(base_policy, adapters):
    openai = pytest.importorskip("openai")
    with PolicyServer(base_policy, adapter_root=adapters["root"], api_key=KEY) as server:
        client = openai.OpenAI(base_url=server.url + "/v1", api_key=KEY, max_retries=0)
        completion = client.chat.completions.create(
            model=server.model_name,
            messages=MESSAGES,
            temperature=0,
            max_tokens=4,
            logprobs=True,
            extra_body={"structured_outputs": {"choice": ACTIONS}, "return_token_ids": True},
        )
        expected = base_policy.generate(MESSAGES, choices=ACTIONS, greedy=True)
        assert completion.choices[0].message.content == expected.text
        assert [t.logprob for t in completion.choices[0].logprobs.content] == expected.logprobs
        assert completion.choices[0].token_ids == expected.token_ids
        assert completion.prompt_token_ids == expected.prompt_ids
        assert completion.agent_rl_policy_version == "base" and completion.usage.completion_tokens == 2
        assert [m.id for m in client.models.list()] == [server.model_name]
        with pytest.raises(openai.BadRequestError, match="n=2"):
            client.chat.completions.create(model=server.model_name, messages=MESSAGES, n=2)
        with pytest.raises(openai.AuthenticationError):
            openai.OpenAI(base_url=server.url + "/v1", api_key="wrong", max_retries=0).models.list()


def test_the_cli_serves_prints_the_url_and_stops_on_sigterm(model_dir, tmp_path):
    env = {**os.environ, "POLICY_KEY": KEY}
    command = [sys.executable, "-m", "agent_rl_plugin", "policy", "serve", "--model", model_dir, "--port", "0"]
    with subprocess.Popen(
        [*command, "--threads", "1", "--api-key-env", "POLICY_KEY", "--adapter-root", str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,  # a few lines: read once the process has ended
        text=True,
        env=env,
    ) as process:
        first_line: queue.Queue[str] = queue.Queue()
        threading.Thread(target=lambda: first_line.put(process.stdout.readline()), daemon=True).start()
        try:
            url = first_line.get(timeout=120).strip()
            assert url.startswith("http://127.0.0.1:") and url.endswith("/v1"), url
            headers = {"Authorization": f"Bearer {KEY}"}
            status, _, models = request(url[: -len("/v1")], "GET", "/v1/models", headers=headers)
            assert status == 200 and models["data"][0]["id"] == model_dir
        finally:
            process.send_signal(signal.SIGTERM)
            try:
                _, errors = process.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                raise
    assert process.returncode == 0, errors
    from typer.testing import CliRunner

    from agent_rl_plugin.cli.main import build_app

    for args, expected in (
        (["--host", "0.0.0.0"], "without an API key"),
        (["--api-key-env", "NO_SUCH_VAR_SET"], "NO_SUCH_VAR_SET"),
    ):  # refused before the model loads
        result = CliRunner().invoke(build_app(), ["policy", "serve", "--model", model_dir, *args])
        assert result.exit_code == 1 and expected in str(result.exception), result.output


def test_weights_changed_behind_the_servers_back_are_refused_not_mislabelled(base_policy, adapters):
    with PolicyServer(base_policy, adapter_root=adapters["root"]) as server:
        server.load_adapter("policy", adapters["one"])  # in process: the loop's way, no root check
        assert chat(server.url, model="policy", max_tokens=2)[0] == 200
        base_policy.load_adapter(None)  # on the policy directly: the server's name now lies
        message = assert_error(*chat(server.url, model="policy", max_tokens=2)[::2], 409)
        assert "changed" in message


def test_a_get_with_a_body_never_smuggles_a_second_request(base_policy):

    with PolicyServer(base_policy) as server:
        answers = _get_with_body(server.url)
    assert answers.count(b"HTTP/1.1 ") == 1  # one answer, then the connection is closed


def test_seeds_and_choice_sets_past_their_limits_are_400(base_policy):
    from agent_rl_plugin.policy.protocol import MAX_CHOICE_SET_CHARS

    with PolicyServer(base_policy) as server:
        status, _, answer = chat(server.url, seed=2**70)
        assert "seed" in assert_error(status, answer, 400)
        many = [f"{i:04d}" + "x" * 40 for i in range(MAX_CHOICE_SET_CHARS // 40)]
        status, _, answer = chat(server.url, structured_outputs={"choice": many})
        assert "characters together" in assert_error(status, answer, 400)


def _get_with_body(url):
    import socket
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    inner = f"GET /v1/models HTTP/1.1\r\nHost: {parts.hostname}:{parts.port}\r\n\r\n".encode()
    outer = (
        f"GET /health HTTP/1.1\r\nHost: {parts.hostname}:{parts.port}\r\nContent-Length: {len(inner)}\r\n\r\n".encode()
        + inner
    )
    with socket.create_connection((parts.hostname, parts.port), timeout=10) as connection:
        connection.sendall(outer)
        received = b""
        while True:
            chunk = connection.recv(65536)
            if not chunk:
                break
            received += chunk
    return received
