#!/usr/bin/python3
"""Checks a running hilo_server the way a client and a kubelet would.

Generates the hilo.v1 Python messages from proto/ with the system protoc into
a temporary folder, then over plain-text gRPC:
  1. grpc.health.v1.Health/Check for the whole server must answer SERVING
     (what the StatefulSet's gRPC probes ask);
  2. hilo.v1.HiLo/NextRange on a fresh collection must answer exactly the
     expected low, high and node tag;
and optionally fetches the Prometheus endpoint (must answer 200 with at
least one sample line). Needs Debian's python3-grpcio (run with
/usr/bin/python3). Exit status 0 only if every check passed.
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request


def fail(message):
    print(f"hilo_probe: FAIL: {message}", file=sys.stderr)
    sys.exit(1)


def load_messages(proto_root, workdir):
    protoc = shutil.which("protoc")
    if not protoc:
        fail("protoc is not installed (Debian package protobuf-compiler)")
    subprocess.run(
        [protoc, f"-I{proto_root}", f"--python_out={workdir}",
         os.path.join(proto_root, "hilo/v1/hilo.proto")],
        check=True)
    sys.path.insert(0, workdir)
    from hilo.v1 import hilo_pb2  # pylint: disable=import-outside-toplevel
    return hilo_pb2


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", required=True, help="host:port")
    parser.add_argument("--proto_root", required=True)
    parser.add_argument("--collection", default="deploy-probe")
    parser.add_argument("--expect_tag", required=True)
    parser.add_argument("--expect_low", type=int, default=1)
    parser.add_argument("--expect_high", type=int, default=32)
    parser.add_argument("--metrics_url", default="")
    parser.add_argument("--timeout", type=float, default=20.0)
    args = parser.parse_args()

    try:
        import grpc  # pylint: disable=import-outside-toplevel
    except ImportError:
        fail("python module grpc missing: install Debian's python3-grpcio "
             "and run this with /usr/bin/python3")

    workdir = tempfile.mkdtemp(prefix="hilo-probe-")
    try:
        pb = load_messages(args.proto_root, workdir)
        channel = grpc.insecure_channel(
            args.target, options=[("grpc.enable_http_proxy", 0)])
        try:
            grpc.channel_ready_future(channel).result(timeout=args.timeout)
        except grpc.FutureTimeoutError:
            fail(f"no gRPC connection to {args.target} within "
                 f"{args.timeout:g}s")

        # grpc.health.v1: HealthCheckRequest{service: ""} encodes to no bytes;
        # HealthCheckResponse{status: SERVING (1)} to field 1, varint 1.
        check = channel.unary_unary(
            "/grpc.health.v1.Health/Check",
            request_serializer=lambda raw: raw,
            response_deserializer=lambda raw: raw)
        health = check(b"", timeout=args.timeout)
        if health != b"\x08\x01":
            fail(f"Health/Check answered {health!r}, not SERVING (b'\\x08\\x01')")

        next_range = channel.unary_unary(
            "/hilo.v1.HiLo/NextRange",
            request_serializer=pb.NextRangeRequest.SerializeToString,
            response_deserializer=pb.NextRangeResponse.FromString)
        reply = next_range(pb.NextRangeRequest(collection=args.collection),
                           timeout=args.timeout)
        got = {"low": reply.low, "high": reply.high, "node_tag": reply.node_tag}
        want = {"low": args.expect_low, "high": args.expect_high,
                "node_tag": args.expect_tag}
        if got != want:
            fail(f"NextRange({args.collection!r}) answered {got}, expected {want}")
        if not reply.HasField("range_at") or reply.range_at.seconds <= 0:
            fail("NextRange answered no range_at time")
        if abs(reply.range_at.seconds - time.time()) > 300:
            fail(f"NextRange's range_at {reply.range_at.seconds} is not now")
        channel.close()

        summary = {"health": "SERVING", "next_range": got}
        if args.metrics_url:
            try:
                opener = urllib.request.build_opener(
                    urllib.request.ProxyHandler({}))
                with opener.open(args.metrics_url,
                                 timeout=args.timeout) as response:
                    status = response.status
                    body = response.read().decode("utf-8", "replace")
            except OSError as error:
                fail(f"GET {args.metrics_url}: {error}")
            sample = re.compile(
                r"^[A-Za-z_:][A-Za-z0-9_:]*(\{[^}]*\})? [-+0-9.eEIinfNa]+",
                re.MULTILINE)
            if status != 200 or not sample.search(body):
                fail(f"GET {args.metrics_url}: status {status}, no Prometheus "
                     f"sample in {body[:200]!r}")
            summary["metrics"] = f"{status}, {len(body.splitlines())} lines"
        print("hilo_probe: ok " + json.dumps(summary, sort_keys=True))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
