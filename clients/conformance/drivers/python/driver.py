"""The Python client's conformance driver (clients/conformance/PROTOCOL.md):
one hilo_client.Client, driven by JSON lines on stdin, answered on stdout.

Needs hilo_client (clients/python) and the generated stubs on PYTHONPATH;
build.sh makes an executable that sets both.
"""

import json
import os
import sys
import threading
import time

import grpc

import hilo_client


def error(code, message):
    return {"ok": False, "code": code, "message": message}


def from_exception(e):
    if isinstance(e, hilo_client.HiloError):
        return error(e.code.name, e.message)
    if isinstance(e, ValueError):  # bad options
        return error("INVALID_ARGUMENT", str(e))
    return error("UNKNOWN", f"{type(e).__name__}: {e}")


class Driver:
    def __init__(self):
        self.client = None
        self.separator = "/"

    def open(self, req):
        if self.client is not None:
            self.client.close()
            self.client = None
        kwargs = {"separator": req.get("separator", "/"),
                  "rpc_deadline": req.get("rpc_deadline_ms", 5000) / 1000.0,
                  "prefetch_at": req.get("prefetch_at", 0.2)}
        if "ca_file" in req:
            with open(req["ca_file"], "rb") as f:
                kwargs["credentials"] = grpc.ssl_channel_credentials(f.read())
        self.client = hilo_client.Client(req["targets"], **kwargs)
        self.separator = kwargs["separator"]
        return {"ok": True}

    def need_client(self):
        if self.client is None:
            raise RuntimeError("no client: send open first")
        return self.client

    def next_id(self, req):
        i = self.need_client().next_id(req["collection"])
        return {"ok": True, "number": str(i.number), "tag": i.node_tag}

    def next_document_id(self, req):
        return {"ok": True, "document_id":
                self.need_client().next_document_id(req["collection"])}

    def draw(self, req):
        client = self.need_client()
        collection = req["collection"]
        count = req.get("count")
        until = (time.monotonic() + req["millis"] / 1000.0
                 if "millis" in req else None)
        keep_going = req.get("keep_going", False)
        ids, errors = [], {}
        lock = threading.Lock()
        start = threading.Barrier(req["callers"])

        def caller():
            mine, failed = [], {}
            start.wait()
            n = 0
            while (count is None or n < count) and (
                    until is None or time.monotonic() < until):
                n += 1
                try:
                    mine.append(client.next_document_id(collection))
                except Exception as e:  # noqa: BLE001 - counted by code
                    code = from_exception(e)["code"]
                    failed[code] = failed.get(code, 0) + 1
                    if not keep_going:
                        break
            with lock:
                ids.extend(mine)
                for k, v in failed.items():
                    errors[k] = errors.get(k, 0) + v

        threads = [threading.Thread(target=caller)
                   for _ in range(req["callers"])]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return {"ok": True, "document_ids": ids,
                "errors": {k: str(v) for k, v in errors.items()}}

    def fork(self, req):
        """Forks; the child draws with the client it inherited, hands its
        ranges back (close), writes its answer to a pipe and ends with
        os._exit (nothing of the parent's flushed or closed twice)."""
        client = self.need_client()
        read_end, write_end = os.pipe()
        sys.stdout.flush()
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                os.close(read_end)
                ids, errors = [], {}
                for _ in range(req.get("count", 0)):
                    try:
                        ids.append(client.next_document_id(req["collection"]))
                    except Exception as e:  # noqa: BLE001 - counted by code
                        c = from_exception(e)["code"]
                        errors[c] = str(int(errors.get(c, 0)) + 1)
                        break
                client.close()
                data = json.dumps({"document_ids": ids,
                                   "errors": errors}).encode()
                while data:
                    data = data[os.write(write_end, data):]
            except BaseException:  # noqa: BLE001 - the parent sees no answer
                code = 1
            finally:
                os._exit(code)
        os.close(write_end)
        chunks = []
        while True:
            chunk = os.read(read_end, 65536)
            if not chunk:
                break
            chunks.append(chunk)
        os.close(read_end)
        _, status = os.waitpid(pid, 0)
        if status != 0 or not chunks:
            return error("DRIVER", f"the forked child ended with status "
                                   f"{status} and no answer")
        body = json.loads(b"".join(chunks))
        return {"ok": True, "forked": True, **body}

    def stats(self, req):
        s = self.need_client().stats()
        names = ("calls_waited", "ranges_fetched", "ranges_prefetched",
                 "failovers", "returns_applied", "returns_refused",
                 "returns_failed")
        return {"ok": True, "stats": {k: str(getattr(s, k)) for k in names}}

    def close(self, req):
        if req.get("keep_open"):
            # Hands every unused range back; the client stays usable.
            self.need_client().return_unused_ranges()
            return {"ok": True, "kept_open": True}
        self.need_client().close()
        return {"ok": True}


def main():
    driver = Driver()
    ops = {"open": driver.open, "next_id": driver.next_id,
           "next_document_id": driver.next_document_id, "draw": driver.draw,
           "fork": driver.fork, "stats": driver.stats, "close": driver.close}
    write_lock = threading.Lock()
    in_flight = []  # threads answering requests that carry an "id"

    def write(answer):
        with write_lock:
            print(json.dumps(answer), flush=True)

    def answer_to(req, op):
        handler = ops.get(op)
        if handler is None:
            return error("DRIVER", f"unknown op {op!r}")
        try:
            return handler(req)
        except KeyError as e:
            return error("DRIVER", f"{op}: missing field {e}")
        except Exception as e:  # noqa: BLE001 - sent to the runner
            return from_exception(e)

    def answer_later(req, op):
        answer = answer_to(req, op)
        answer["id"] = req["id"]
        write(answer)

    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            req = json.loads(line)
            op = req["op"]
        except (ValueError, KeyError, TypeError) as e:
            write(error("DRIVER", f"cannot parse request {line!r}: {e}"))
            continue
        if op == "exit":
            write({"ok": True})
            break
        if isinstance(req.get("id"), str):
            # In flight while the next requests are read (PROTOCOL.md).
            t = threading.Thread(target=answer_later, args=(req, op))
            t.start()
            in_flight.append(t)
            continue
        write(answer_to(req, op))
    for t in in_flight:
        t.join()
    if driver.client is not None:
        driver.client.close()


if __name__ == "__main__":
    main()
