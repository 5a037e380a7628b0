#!/usr/bin/env python3
"""The server bench's own cost: the client's CPU time per request as a share of the request's wall time.

`tunehost bench --server` promises that its request handling (building the prompt's JSON, reading the stream,
parsing every SSE line, timing) stays below 1 % of request time, so the numbers are the server's, not the client's.
Each request's client thread measures its own CPU time (time.thread_time) around the request; this script runs a
server bench and reports the share.

    python scripts/bench_server_overhead.py                       # llama-server on the tiny test model (--serve)
    python scripts/bench_server_overhead.py --model medium --depths 512 -n 64
    python scripts/bench_server_overhead.py --server http://127.0.0.1:8080
    python scripts/bench_server_overhead.py --json out.json

Exit 1 when the overall share is 1 % or more.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "scripts"))

TARGET_PERCENT = 1.0


def main(argv: list[str] | None = None) -> int:
    from tunehost.bench.server import launch as serving
    from tunehost.bench.server.rounds import ServerSettings, ServerTarget, measure_server
    from tunehost.bench.server.client import parse_target

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="tiny", help="tiny, medium or a GGUF path (--serve)")
    parser.add_argument("--server", help="measure a running llama-server instead")
    parser.add_argument("--depths", default="512", help="prompt depths, N,N,...")
    parser.add_argument("-n", "--n-gen", type=int, default=64)
    parser.add_argument("--clients", default="1,2")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", metavar="OUT")
    args = parser.parse_args(argv)
    settings = ServerSettings(depths=tuple(int(d) for d in args.depths.split(",")), n_gen=args.n_gen,
                              clients=tuple(int(c) for c in args.clients.split(",")), budget_s=0,
                              min_rounds=args.rounds, max_rounds=args.rounds)
    if args.server:
        result = measure_server([ServerTarget("server", parse_target(args.server))], settings)
    else:
        import make_test_model

        model = make_test_model.ensure_model(args.model) if args.model in ("tiny", "medium") else Path(args.model)
        serving.install_handlers()
        argv_server = ["llama-server", "-m", str(model), "-c", "4096", "-np", "2"]
        with serving.ServedServer(argv_server, name="A") as served:
            result = measure_server([ServerTarget("A", served.target, served.command, served.died)], settings)
    overhead = dict(result.overhead)
    counted = [r for r in result.records if r.round > 0]
    overhead.update(client_cpu_ms_total=round(sum(r.client_cpu_ms for r in counted), 3),
                    request_ms_total=round(sum(r.total_ms for r in counted), 3),
                    build=result.servers[0].build, model=result.servers[0].model_path)
    print(f"client overhead: {overhead['total_percent']:.3f} % of request time over {overhead['requests']} requests "
          f"(median {overhead['median_percent']:.3f} %, max {overhead['max_percent']:.3f} %; "
          f"{overhead['client_cpu_ms_total']:.1f} ms client CPU in {overhead['request_ms_total']:.0f} ms of requests); "
          f"target < {TARGET_PERCENT:g} %")
    if args.json:
        Path(args.json).write_text(json.dumps(overhead, indent=2) + "\n")
    return 0 if overhead["total_percent"] < TARGET_PERCENT else 1


if __name__ == "__main__":
    sys.exit(main())
