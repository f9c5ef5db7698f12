"""gRPC server reflection: off by default (UNIMPLEMENTED: it would list every
method to anyone who connects); with --enable_reflection it lists hilo's
services. Usage: reflection_test.py HILO_SERVER."""
import re
import subprocess
import sys
import tempfile

import grpc

METHOD = "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo"
# ServerReflectionRequest { string list_services = 7; } with an empty value.
LIST_SERVICES = b"\x3a\x00"


def start(server, directory, *flags):
    process = subprocess.Popen(
        [server, "--listen=127.0.0.1:0", "--metrics_listen=",
         f"--db={directory}/hilo.db", "--create_db", *flags],
        stderr=subprocess.PIPE)
    line = process.stderr.readline().decode()
    match = re.search(r" on port (\d+) ", line)
    if not match:
        process.kill()
        sys.exit(f"no start-up line from hilo_server: {line!r}")
    return process, int(match.group(1))


def list_services(port):
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        call = channel.stream_stream(METHOD, request_serializer=None,
                                     response_deserializer=None)
        return b"".join(call(iter([LIST_SERVICES]), timeout=10))


def main():
    server = sys.argv[1]
    failures = []
    with tempfile.TemporaryDirectory() as directory:
        process, port = start(server, directory, "--enable_reflection")
        try:
            reply = list_services(port)
            for name in (b"hilo.v1.HiLo", b"hilo.v1.HiLoAdmin",
                         b"grpc.health.v1.Health"):
                if name not in reply:
                    failures.append(f"reflection does not list {name!r}")
        finally:
            process.terminate()
            process.wait(timeout=30)
    with tempfile.TemporaryDirectory() as directory:
        process, port = start(server, directory)
        try:
            list_services(port)
            failures.append("reflection is served without --enable_reflection")
        except grpc.RpcError as error:
            if error.code() != grpc.StatusCode.UNIMPLEMENTED:
                failures.append(f"reflection by default gave {error.code()}")
        finally:
            process.terminate()
            process.wait(timeout=30)
    for failure in failures:
        print(failure)
    print(f"{2 - min(len(failures), 2)} passed, {len(failures)} failed")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
