"""Agent Lightning's store server for the receiver comparison, run with the peer environment's
python (standard library at the top; agentlightning imported in ``main``):

    <agl venv>/bin/python bench/peers/agl_server.py --port 4747

Starts an ``InMemoryLightningStore`` (0.3.0 has no file store) behind ``LightningStoreServer``
(FastAPI; OTLP/HTTP at ``/v1/traces``), starts one rollout (the OTLP endpoint files spans by the
``agentlightning.rollout_id`` / ``agentlightning.attempt_id`` resource attributes, and needs
them), prints one JSON line ``{"url", "rollout_id", "attempt_id", "version"}`` and serves until
its standard input closes. Spans stored: ``GET {url}/v1/agl/statistics`` -> ``total_spans``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys


async def serve(port: int) -> None:
    from importlib.metadata import version

    import agentlightning as agl

    logging.getLogger("agentlightning").setLevel(logging.ERROR)
    store = agl.InMemoryLightningStore(thread_safe=True)
    server = agl.LightningStoreServer(store, host="127.0.0.1", port=port)
    await server.start()
    attempted = await server.start_rollout(input={"task": "bench"})
    print(
        json.dumps(
            {
                "url": f"http://127.0.0.1:{port}",
                "rollout_id": attempted.rollout_id,
                "attempt_id": attempted.attempt.attempt_id,
                "version": version("agentlightning"),
            }
        ),
        flush=True,
    )
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)  # until the bench closes stdin
    await server.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args(argv)
    asyncio.run(serve(args.port))
    return 0


if __name__ == "__main__":
    sys.exit(main())
