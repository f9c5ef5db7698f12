"""Scenario: one scenario of scenarios/*.json run step by step against one
client (its nodes, proxies and drivers), with every ID any client handed
out and every range returned checked against the contract, whatever the
scenario says."""

from __future__ import annotations

import json
import os
import re
import threading
import time
from typing import Dict, List, Tuple

import grpc

from driver import ANSWER_TIMEOUT_S, Driver
from outcomes import Failure, Skip
from peers import Peers
from processes import FaultLoop, Node
from proxy import Issued, Proxy, hilo_pb2, hilo_pb2_grpc

TAG = re.compile(r"[A-Z0-9]{1,4}")
NUMBER_TAG = re.compile(r"([1-9][0-9]*)-([A-Z0-9]{1,4})")
STAT_NAMES = ("calls_waited", "ranges_fetched", "ranges_prefetched",
              "failovers", "returns_applied", "returns_refused",
              "returns_failed")
LIBFAKETIME = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"


class Scenario:
    def __init__(self, spec: Dict, server: str, driver_cmd: List[str],
                 tmp: str):
        self.spec = spec
        self.server = server
        self.driver_cmd = driver_cmd
        self.tmp = tmp
        self.nodes: Dict[str, Node] = {}
        self.proxies: Dict[str, Proxy] = {}
        self.drivers: Dict[str, Driver] = {}
        # (collection, number, tag) -> where it was seen first
        self.ids: Dict[Tuple[str, int, str], str] = {}
        # (collection, number, tag) -> (the client that handed it out, the
        # time.monotonic() at which the runner had its answer)
        self.owners: Dict[Tuple[str, int, str], Tuple[str, float]] = {}
        self._ids_lock = threading.Lock()
        # Steps started with "start" (run in a thread of their own, their
        # requests in flight while later steps run): name -> [thread, error]
        self._started: Dict[str, List] = {}
        self._local = threading.local()
        self.direct_nodes: set = set()  # nodes some client targets directly
        self.notes: List[str] = []

    # IDs ------------------------------------------------------------------

    def _see(self, collection: str, number: int, tag: str, where: str,
             client: str = "c1"):
        if number < 1:
            raise Failure(f"{where}: number {number} of {collection!r} is "
                          f"below 1")
        if not TAG.fullmatch(tag):
            raise Failure(f"{where}: {collection!r} number {number} has tag "
                          f"{tag!r}, not 1-4 characters of A-Z0-9")
        key = (collection, number, tag)
        with self._ids_lock:
            if key in self.ids:
                raise Failure(f"{where}: ID {number}-{tag} of {collection!r} "
                              f"handed out twice (first: {self.ids[key]})")
            self.ids[key] = where
            self.owners[key] = (client, time.monotonic())

    def _see_document_id(self, driver: Driver, collection: str, doc: str,
                         where: str) -> Tuple[int, str]:
        prefix = collection + driver.separator
        if not isinstance(doc, str) or not doc.startswith(prefix):
            raise Failure(f"{where}: document ID {doc!r} does not start with "
                          f"{prefix!r}")
        m = NUMBER_TAG.fullmatch(doc[len(prefix):])
        if not m:
            raise Failure(f"{where}: document ID {doc!r} is not "
                          f"{prefix}NUMBER-TAG (NUMBER >= 1 without leading "
                          f"zeros, TAG 1-4 of A-Z0-9)")
        number, tag = int(m.group(1)), m.group(2)
        self._see(collection, number, tag, where, driver.name)
        return number, tag

    def _check_ranges(self) -> None:
        """Every ID whose tag belongs to a node reached only through
        proxies lies in a range that node issued, whole and unaltered."""
        for (collection, number, tag), where in self.ids.items():
            owners = [n for n in self.nodes.values() if n.tag == tag]
            if not owners or any(n.name in self.direct_nodes for n in owners):
                continue
            holding = [r for p in self.proxies.values() for r in p.issued
                       if r.collection == collection and r.tag == tag and
                       r.low <= number <= r.high and not r.broken]
            if not holding:
                raise Failure(
                    f"{where}: ID {number}-{tag} of {collection!r} is in no "
                    f"range node {tag} issued (that reached the client "
                    f"intact)")
            client, _ = self.owners[(collection, number, tag)]
            if all(r.client is not None and r.client != client
                   for r in holding):
                raise Failure(
                    f"{where}: ID {number}-{tag} of {collection!r}, handed "
                    f"out by client {client}, lies only in a range node "
                    f"{tag} issued to another client "
                    f"({', '.join(sorted({r.client for r in holding}))})")
        self._check_returns_cover_ids()

    def _check_returns_cover_ids(self) -> None:
        """No return gives back a number its client handed out (R6, R8):
        for each return by a known client, every ID that client handed out
        of that range is at or below the return's `last`. An ID the runner
        had before the return reached the proxy was certainly handed out
        before it; one it had later (a draw answers at its end) may also
        come from a later range the node issued to the same client over
        the returned numbers, so it fails only when no such range holds
        it."""
        ranges: Dict[Tuple[str, int], Issued] = {}
        mine: Dict[str, List[Issued]] = {}
        for p in self.proxies.values():
            for r in p.issued:
                ranges.setdefault((r.collection, r.token), r)
                if not r.broken:
                    mine.setdefault(r.client, []).append(r)
        by_range: Dict[Tuple[str, str], List[Tuple[int, str, float]]] = {}
        for (collection, number, tag), (client, at) in self.owners.items():
            by_range.setdefault((collection, tag), []).append(
                (number, client, at))
        for name, p in self.proxies.items():
            for ret in p.returns:
                issued = ranges.get((ret.collection, ret.token))
                if ret.client is None or issued is None:
                    continue
                for number, client, at in by_range.get(
                        (ret.collection, issued.tag), []):
                    if (client != ret.client or number <= ret.last or
                            not issued.low <= number <= issued.high):
                        continue
                    what = (f"client {client} returned {ret.collection!r} "
                            f"{issued.low}-{issued.high} of {issued.tag} "
                            f"with last {ret.last} through proxy {name}")
                    if at < ret.at:
                        raise Failure(
                            f"{what}, after it had handed out "
                            f"{number}-{issued.tag} "
                            f"({self.ids[(ret.collection, number, issued.tag)]})")
                    later = [r for r in mine.get(client, []) + mine.get(
                        None, []) if r.token != issued.token and
                        r.collection == ret.collection and
                        r.tag == issued.tag and r.low <= number <= r.high]
                    if not later:
                        raise Failure(
                            f"{what}, and handed out {number}-{issued.tag} "
                            f"of it ({self.ids[(ret.collection, number, issued.tag)]}), "
                            f"which no other range of the client holds")

    # helpers --------------------------------------------------------------

    def _address(self, name: str) -> str:
        if "+" in name:
            # One target of several addresses ("PA+PB"): gRPC's ipv4: URI,
            # which the client's channel resolves to every address given.
            return "ipv4:" + ",".join(self._address(n)
                                      for n in name.split("+"))
        if name in self.proxies:
            return self.proxies[name].address
        if name in self.nodes:
            self.direct_nodes.add(name)
            return self.nodes[name].address
        raise Failure(f"target {name!r} is neither a node nor a proxy of "
                      f"this scenario")

    def _driver(self, step: Dict) -> Driver:
        name = step.get("client", "c1")
        if name not in self.drivers:
            env = None
            if name in self.spec.get("faketime", []):
                env = self._faketime_env(name)
            self.drivers[name] = Driver(self.driver_cmd, name, self.tmp, env)
        return self.drivers[name]

    def _faketime_file(self, name: str) -> str:
        return os.path.join(self.tmp, f"faketime-{name}")

    def _faketime_env(self, name: str) -> Dict[str, str]:
        """libfaketime for one driver: its wall clock (CLOCK_REALTIME) is
        offset by what the client's faketime file says, read on every call;
        its monotonic clock is left alone. A client whose runtime reads the
        clock without libc (Go) is not affected."""
        if not os.path.exists(LIBFAKETIME):
            raise Failure(f"{LIBFAKETIME} is missing; run "
                          f"scripts/install-deps-languages.sh (libfaketime)")
        with open(self._faketime_file(name), "w") as f:
            f.write("+0\n")
        return {"LD_PRELOAD": LIBFAKETIME,
                "FAKETIME_TIMESTAMP_FILE": self._faketime_file(name),
                "FAKETIME_NO_CACHE": "1", "DONT_FAKE_MONOTONIC": "1"}

    @staticmethod
    def _expect_code(answer: Dict, expect: Dict, where: str,
                     targets: List[str] = ()) -> bool:
        """Checks ok/code; True if the answer is an expected error."""
        if expect.get("any") and not answer["ok"]:
            return True
        code = expect.get("code")
        if code is None:
            if not answer["ok"]:
                raise Failure(f"{where}: failed with {answer.get('code')}: "
                              f"{answer.get('message')}")
            return False
        if answer["ok"]:
            raise Failure(f"{where}: succeeded ({json.dumps(answer)}) where "
                          f"{code} was expected")
        codes = code if isinstance(code, list) else [code]
        if answer.get("code") not in codes:
            raise Failure(f"{where}: failed with {answer.get('code')} "
                          f"({answer.get('message')}) where {code} was "
                          f"expected")
        if not answer.get("message"):
            raise Failure(f"{where}: error {answer.get('code')} carries no "
                          f"message")
        if expect.get("names_targets"):
            missing = [t for t in targets if t not in answer["message"]]
            if missing:
                raise Failure(f"{where}: the message does not name "
                              f"{missing}: {answer['message']!r}")
        absent = [w for w in expect.get("message_has", [])
                  if w not in answer["message"]]
        if absent:
            raise Failure(f"{where}: the message does not say "
                          f"{absent}: {answer['message']!r}")
        return True

    @staticmethod
    def _bounds(value: int, spec, what: str, where: str) -> None:
        if isinstance(spec, int):
            spec = {"eq": spec}
        if "eq" in spec and value != spec["eq"]:
            raise Failure(f"{where}: {what} is {value}, expected "
                          f"{spec['eq']}")
        if "min" in spec and value < spec["min"]:
            raise Failure(f"{where}: {what} is {value}, expected at least "
                          f"{spec['min']}")
        if "max" in spec and value > spec["max"]:
            raise Failure(f"{where}: {what} is {value}, expected at most "
                          f"{spec['max']}")

    def _timed(self, driver: Driver, request: Dict, step: Dict, where: str):
        within = step.get("within_ms")
        timeout = (ANSWER_TIMEOUT_S if within is None else
                   within / 1000.0 + 2)
        start = time.monotonic()
        answer = driver.call(request, timeout,
                             getattr(self._local, "call_id", None))
        took = (time.monotonic() - start) * 1000
        if within is not None and took > within:
            raise Failure(f"{where}: answered after {took:.0f} ms; the "
                          f"bound is {within} ms")
        return answer

    # steps ----------------------------------------------------------------

    def run(self) -> None:
        for name, node in self.spec.get("nodes", {}).items():
            self.nodes[name] = Node(self.server, self.tmp, name,
                                    node.get("tag", name),
                                    node.get("flags", []))
        for name, p in self.spec.get("proxies", {}).items():
            proxy = Proxy(self.nodes[p["node"]].address)
            proxy.set_script(p.get("script", {}))
            self.proxies[name] = proxy
        peers = Peers(lambda: {n: d.proc.pid
                               for n, d in list(self.drivers.items())})
        for proxy in self.proxies.values():
            proxy.who = (lambda context, port=proxy.port:
                         peers.client_of(context.peer(), port))
        for i, step in enumerate(self.spec["steps"]):
            where = f"step {i + 1} ({step['do']}" + (
                f" by {step['client']}" if "client" in step else "") + ")"
            if "start" in step:
                self._start(step, where)
            else:
                getattr(self, "step_" + step["do"])(step, where)
        for name in list(self._started):
            self.step_await({"name": name}, "the end (await)")
        for name, proxy in self.proxies.items():
            if proxy.violations:
                raise Failure(f"proxy {name} saw returns that break the "
                              f"contract: " + "; ".join(proxy.violations))
        self._check_ranges()

    def _start(self, step: Dict, where: str) -> None:
        """Runs the step in a thread of its own: its requests carry the id
        `start` names (PROTOCOL.md), so the driver works on them while the
        next steps run. An `await` step with that name waits for it."""
        name = step["start"]
        if name in self._started:
            raise Failure(f"{where}: {name!r} is already started")
        self._driver(step)  # started here, not in the thread
        slot: List = [None, None]

        def run() -> None:
            self._local.call_id = name
            try:
                getattr(self, "step_" + step["do"])(step, where)
            except (Failure, Skip) as e:
                slot[1] = e
            except Exception as e:  # a runner bug: reported at the await
                slot[1] = Failure(f"{where}: runner error: "
                                  f"{type(e).__name__}: {e}")

        slot[0] = threading.Thread(target=run, daemon=True)
        self._started[name] = slot
        slot[0].start()

    def step_await(self, step: Dict, where: str) -> None:
        """Waits for a started step; its failure is the scenario's. Every
        wait inside the step is bounded (the driver's answer), so is this."""
        slot = self._started.pop(step["name"], None)
        if slot is None:
            raise Failure(f"{where}: no step was started as "
                          f"{step['name']!r}")
        slot[0].join(step.get("within_ms", 300_000) / 1000.0)
        if slot[0].is_alive():
            raise Failure(f"{where}: the step started as {step['name']!r} "
                          f"did not end")
        if slot[1] is not None:
            raise slot[1]

    def close(self) -> None:
        for d in self.drivers.values():
            d.stop()
        for p in self.proxies.values():
            p.stop()
        for n in self.nodes.values():
            n.stop()

    def step_open(self, step: Dict, where: str) -> None:
        d = self._driver(step)
        request = {"op": "open",
                   "targets": [self._address(t) for t in step["targets"]]}
        for k in ("separator", "prefetch_at", "rpc_deadline_ms"):
            if k in step:
                request[k] = step[k]
        answer = self._timed(d, request, step, where)
        if not self._expect_code(answer, step.get("expect", {}), where):
            d.separator = step.get("separator", "/")
            d.targets = request["targets"]

    def step_next_id(self, step: Dict, where: str) -> None:
        self._next(step, where, "next_id")

    def step_next_document_id(self, step: Dict, where: str) -> None:
        self._next(step, where, "next_document_id")

    def _next(self, step: Dict, where: str, op: str) -> None:
        d = self._driver(step)
        collection = step["collection"]
        expect = step.get("expect", {})
        got: List[Tuple[int, str]] = []
        for k in range(step.get("times", 1)):
            w = f"{where} call {k + 1}"
            if "until_ok_ms" in step:
                answer = self._until_ok(d, op, collection, step, w)
            else:
                answer = self._timed(
                    d, {"op": op, "collection": collection}, step, w)
            if self._expect_code(answer, expect, w, d.targets):
                continue
            if op == "next_id":
                try:
                    number = int(answer["number"])
                except (KeyError, TypeError, ValueError):
                    raise Failure(f"{w}: answer has no decimal string "
                                  f"number: {json.dumps(answer)}")
                tag = answer.get("tag")
                if not isinstance(tag, str):
                    raise Failure(f"{w}: answer has no tag")
                self._see(collection, number, tag, w, d.name)
            else:
                number, tag = self._see_document_id(
                    d, collection, answer.get("document_id"), w)
                if "ids" in expect and answer["document_id"] != \
                        expect["ids"][k]:
                    raise Failure(f"{w}: got {answer['document_id']!r}, "
                                  f"expected {expect['ids'][k]!r}")
            got.append((number, tag))
        if "numbers" in expect:
            lo, hi = expect["numbers"]
            want = list(range(lo, hi + 1))
            if [n for n, _ in got] != want:
                raise Failure(f"{where}: numbers {self._brief(got)}, "
                              f"expected {lo}..{hi} in order")
        if "above" in expect:
            low = [(n, t) for n, t in got if n <= expect["above"]]
            if low:
                raise Failure(f"{where}: numbers {self._brief(low)}, expected "
                              f"each above {expect['above']}")
        if "first" in expect and got and got[0][0] != expect["first"]:
            raise Failure(f"{where}: first number {got[0][0]}, expected "
                          f"{expect['first']}")
        if "tag" in expect:
            bad = [(n, t) for n, t in got if t != expect["tag"]]
            if bad:
                raise Failure(f"{where}: tags {self._brief(bad)}, expected "
                              f"all {expect['tag']!r}")

    def _until_ok(self, d: Driver, op: str, collection: str, step: Dict,
                  where: str) -> Dict:
        """Recovery: the same call again until it succeeds, failing only
        with the codes `retry_on` names meanwhile. Notes how long it took
        from the step's start (the previous step's end, e.g. a restarted
        node serving) to the answer that ended the wait."""
        request = {"op": op, "collection": collection}
        start = time.monotonic()
        limit = start + step["until_ok_ms"] / 1000.0
        failed: Dict[str, List[float]] = {}  # code -> each call's ms
        while True:
            began = time.monotonic()
            answer = self._timed(d, request, step, where)
            if (answer["ok"] or time.monotonic() >= limit
                    or answer.get("code") not in step["retry_on"]):
                break
            failed.setdefault(answer.get("code"), []).append(
                (time.monotonic() - began) * 1000)
            time.sleep(0.05)
        took = (time.monotonic() - start) * 1000
        outcome = "ok" if answer["ok"] else answer.get("code")
        before = ", ".join(f"{len(ms)} {code} in {min(ms):.0f}-{max(ms):.0f} "
                           f"ms each" for code, ms in failed.items())
        self.notes.append(f"{where}: {outcome} after {took:.0f} ms"
                          + (f" (before it: {before})" if before else ""))
        if answer["ok"] and took > step["until_ok_ms"]:
            # A call sent before the bound may answer well after it: the
            # bound is on when the client served, not on when it was asked.
            raise Failure(f"{where}: ok only after {took:.0f} ms; the bound "
                          f"is {step['until_ok_ms']} ms"
                          + (f" (before it: {before})" if before else ""))
        return answer

    @staticmethod
    def _brief(got: List[Tuple[int, str]]) -> str:
        text = ", ".join(f"{n}-{t}" for n, t in got[:12])
        return text + (f", ... ({len(got)} in all)" if len(got) > 12 else "")

    def step_draw(self, step: Dict, where: str) -> None:
        """One draw, or with repeat_for_ms, draws one after another (gap_ms
        apart) until that time is up: callers stay concurrent within each
        draw while the number of IDs stays bounded however fast the client
        is. With faults, a FaultLoop runs meanwhile."""
        d = self._driver(step)
        request = {"op": "draw", "collection": step["collection"],
                   "callers": step["callers"],
                   "keep_going": step.get("keep_going", False)}
        for k in ("count", "millis"):
            if k in step:
                request[k] = step[k]
        faults = None
        if "faults" in step:
            faults = FaultLoop(self.nodes, step["faults"])
            faults.start()
        total_ids, errors, draws = 0, {}, 0
        start = time.monotonic()
        try:
            while True:
                draws += 1
                answer = self._timed(d, request, step, where)
                if self._expect_code(answer, {}, where):
                    return
                ids = answer.get("document_ids")
                got = answer.get("errors")
                if not isinstance(ids, list) or not isinstance(got, dict):
                    raise Failure(f"{where}: draw answered without "
                                  f"document_ids and errors")
                for doc in ids:
                    self._see_document_id(d, step["collection"], doc, where)
                total_ids += len(ids)
                for code, n in got.items():
                    errors[code] = errors.get(code, 0) + int(n)
                left = step.get("repeat_for_ms", 0) / 1000.0 - (
                    time.monotonic() - start)
                if left <= 0:
                    break
                time.sleep(min(left, step.get("gap_ms", 0) / 1000.0))
        finally:
            if faults:
                faults.stop()
        if faults:
            self.notes.append(f"{where}: {draws} draws, {total_ids} IDs, "
                              f"errors {errors or 'none'}, {faults.rounds} "
                              f"fault rounds")
        expect = step.get("expect", {})
        allowed = expect.get("errors", [])
        for code, n in errors.items():
            if code not in allowed:
                raise Failure(f"{where}: {n} calls failed with {code}; "
                              f"allowed: {allowed or 'none'}")
        if "error_count" in expect:
            self._bounds(sum(errors.values()), expect["error_count"],
                         "the number of errors", where)
        if "ids" in expect:
            self._bounds(total_ids, expect["ids"], "the number of IDs",
                         where)

    def step_fork(self, step: Dict, where: str) -> None:
        """The client's process forks (CONTRACT.md R16); the child draws
        `count` IDs one at a time with the client it inherited, hands its
        ranges back and ends. Its IDs join every other's in the checks.
        SKIP for a client whose language does not fork."""
        d = self._driver(step)
        answer = self._timed(d, {"op": "fork", "collection":
                                 step["collection"],
                                 "count": step.get("count", 0)}, step, where)
        if self._expect_code(answer, {}, where):
            return
        if not answer.get("forked"):
            raise Skip(f"{where}: this client's language does not fork "
                       f"(its README says what its users must know)")
        ids, errors = answer.get("document_ids"), answer.get("errors")
        if not isinstance(ids, list) or not isinstance(errors, dict):
            raise Failure(f"{where}: fork answered without document_ids "
                          f"and errors")
        for doc in ids:
            self._see_document_id(d, step["collection"], doc,
                                  where + " in the child")
        expect = step.get("expect", {})
        allowed = expect.get("errors", [])
        for code in errors:
            if code not in allowed:
                raise Failure(f"{where}: the child's calls failed with "
                              f"{code}; allowed: {allowed or 'none'}")
        if "ids" in expect:
            self._bounds(len(ids), expect["ids"], "the child's IDs", where)

    def step_stats(self, step: Dict, where: str) -> None:
        """Checks the driver's counters. With until_ms, asks again (every
        10 ms) until `until` holds, failing only if it does not within
        until_ms: a wait for something the client does in the background
        (a prefetch) that ends on what happened, not on a guess of how
        long it takes. Then `expect` must hold."""
        d = self._driver(step)
        limit = time.monotonic() + step.get("until_ms", 0) / 1000.0
        while True:
            values = self._stats(d, step, where)
            try:
                for name, spec in step.get("until", {}).items():
                    self._bounds(values[name], spec, name, where)
                break
            except Failure as e:
                if time.monotonic() >= limit:
                    raise Failure(f"{e} (still, after waiting "
                                  f"{step.get('until_ms', 0)} ms)")
            time.sleep(0.01)
        for name, spec in step.get("expect", {}).items():
            self._bounds(values[name], spec, name, where)

    def _stats(self, d: Driver, step: Dict, where: str) -> Dict[str, int]:
        answer = self._timed(d, {"op": "stats"}, step, where)
        self._expect_code(answer, {}, where)
        stats = answer.get("stats")
        if not isinstance(stats, dict):
            raise Failure(f"{where}: stats answered without stats")
        values = {}
        for name in STAT_NAMES:
            try:
                values[name] = int(stats[name])
            except (KeyError, TypeError, ValueError):
                raise Failure(f"{where}: stats has no decimal string "
                              f"{name!r}: {json.dumps(stats)}")
        return values

    def step_close(self, step: Dict, where: str) -> None:
        d = self._driver(step)
        request = {"op": "close"}
        if step.get("keep_open"):
            request["keep_open"] = True
        answer = self._timed(d, request, step, where)
        self._expect_code(answer, {}, where)
        if step.get("keep_open") and answer.get("kept_open") is not True:
            raise Skip(f"{where}: the driver closed its client rather than "
                       f"keep it open after returning its ranges (no "
                       f"kept_open in its answer)")
        # close answers once every return it sent was answered: a proxy
        # must have forwarded the node's answer to each of them by now.
        for name, proxy in self.proxies.items():
            pending = [r for r in proxy.returns if r.applied is None]
            if pending:
                raise Failure(
                    f"{where}: close answered while {len(pending)} "
                    f"return(s) through proxy {name} were still unanswered "
                    f"(first: {pending[0].collection!r} end {pending[0].end} "
                    f"last {pending[0].last})")

    def step_set_floor(self, step: Dict, where: str) -> None:
        """HiLoAdmin.SetFloor on a node itself (no proxy): raises the
        collection's Max to at least `floor` (hilo.proto). `expect`:
        `raised` (bool) and `max`, as the reply says."""
        node = self.nodes[step["node"]]
        channel = grpc.insecure_channel(node.address)
        try:
            reply = hilo_pb2_grpc.HiLoAdminStub(channel).SetFloor(
                hilo_pb2.SetFloorRequest(collection=step["collection"],
                                         floor=step["floor"]),
                timeout=step.get("within_ms", 10000) / 1000.0)
        except grpc.RpcError as e:
            raise Failure(f"{where}: SetFloor of {step['collection']!r} to "
                          f"{step['floor']} on node {step['node']} failed "
                          f"with {e.code().name}: {e.details()}")
        finally:
            channel.close()
        expect = step.get("expect", {})
        got = {"raised": reply.raised, "max": reply.max}
        for k, v in expect.items():
            if got[k] != v:
                raise Failure(f"{where}: SetFloor answered {k} {got[k]}, "
                              f"expected {v}")

    def step_kill(self, step: Dict, where: str) -> None:
        self.nodes[step["node"]].kill()

    def step_restart(self, step: Dict, where: str) -> None:
        self.nodes[step["node"]].start()

    def step_pause(self, step: Dict, where: str) -> None:
        self.nodes[step["node"]].pause()

    def step_resume(self, step: Dict, where: str) -> None:
        self.nodes[step["node"]].resume()

    def step_script(self, step: Dict, where: str) -> None:
        self.proxies[step["proxy"]].set_script(step.get("set", {}))

    def step_wait_proxy(self, step: Dict, where: str) -> None:
        proxy = self.proxies[step["proxy"]]
        limit = time.monotonic() + step.get("within_ms", 5000) / 1000.0
        while proxy.count(step["method"]) < step["at_least"]:
            if time.monotonic() > limit:
                raise Failure(f"{where}: proxy {step['proxy']} saw "
                              f"{proxy.count(step['method'])} "
                              f"{step['method']}, not {step['at_least']}, "
                              f"within {step.get('within_ms', 5000)} ms")
            time.sleep(0.005)

    def step_expect_proxy(self, step: Dict, where: str) -> None:
        proxy = self.proxies[step["proxy"]]
        if "count" in step:
            self._bounds(proxy.count(step["method"]), step["count"],
                         f"the number of {step['method']} at proxy "
                         f"{step['proxy']}", where)
        if "sizes" in step:
            sizes = [e["high"] - e["low"] + 1 for e in proxy.next_ranges
                     if e.get("done")]
            if sizes != step["sizes"]:
                raise Failure(f"{where}: range sizes {sizes}, expected "
                              f"{step['sizes']}")
        if "last_max" in step:
            seen = [e["last_max"] for e in proxy.next_ranges]
            if seen != step["last_max"]:
                raise Failure(f"{where}: NextRange calls at proxy "
                              f"{step['proxy']} reported last_max {seen}, "
                              f"expected {step['last_max']}")
        if step.get("echo"):
            self._check_echo(proxy, where, step.get("echo_from", 1))
        if step.get("echo_sane"):
            self._check_echo_sane(proxy, where)
        if "returns" in step:
            self._check_returns(proxy, step["returns"], where)
        if "returned" in step:
            self._check_returned(proxy, step["returned"], where)

    @staticmethod
    def _check_echo(proxy: Proxy, where: str, first: int) -> None:
        """Each NextRange reports the range the client got before it, of
        that collection: its size, its range_at as sent, and its high, or,
        once that range was handed back and the return not refused, the
        highest number the client used from that node's ranges: at most
        the return's last (the `last_max` list of a step checks it exactly).
        NextRange calls before the first-th (1-based) are not checked: they
        may report a range another node issued; their ranges still count
        as the previous range of the calls after them."""
        previous: Dict[str, Dict] = {}
        for k, e in enumerate(proxy.next_ranges):
            prev = previous.get(e["collection"])
            what = f"{where}: NextRange {k + 1} of {e['collection']!r}"
            if k + 1 < first:
                pass
            elif prev is None:
                if e["last_size"] != 0 or e["last_max"] != 0 or \
                        e["last_range_at_us"] is not None:
                    raise Failure(f"{what} reports a previous range "
                                  f"(last_size {e['last_size']}, last_max "
                                  f"{e['last_max']}) before any")
            else:
                size = prev["sent_high"] - prev["sent_low"] + 1
                lasts = [r.last for r in proxy.returns
                         if r.token == prev["token"] and r.applied is not False]
                if e["last_size"] != size:
                    raise Failure(f"{what}: last_size {e['last_size']}, "
                                  f"but the previous range had {size}")
                if e["last_range_at_us"] != prev["range_at_us"]:
                    raise Failure(f"{what}: last_range_at "
                                  f"{e['last_range_at_us']} us, but the "
                                  f"previous range came with "
                                  f"{prev['range_at_us']} us")
                if e["last_max"] != prev["sent_high"] and not (
                        lasts and 0 <= e["last_max"] <= max(lasts)):
                    raise Failure(f"{what}: last_max {e['last_max']}, "
                                  f"expected {prev['sent_high']} (the "
                                  f"range's high) or, after its return, "
                                  f"at most {max(lasts, default=None)}")
            if e.get("done"):
                previous[e["collection"]] = e

    @staticmethod
    def _check_echo_sane(proxy: Proxy, where: str) -> None:
        """No NextRange echoes what a refused reply said (R11): its
        last_range_at is a valid Timestamp and its last_max at most the
        highest number the node really issued of that collection through
        this proxy."""
        issued: Dict[str, int] = {}
        for k, e in enumerate(proxy.next_ranges):
            what = f"{where}: NextRange {k + 1} of {e['collection']!r}"
            if not e["last_range_at_valid"]:
                raise Failure(f"{what} reports a last_range_at that is not a "
                              f"valid Timestamp: it echoes a refused reply")
            top = issued.get(e["collection"], 0)
            if e["last_max"] > top:
                raise Failure(f"{what} reports last_max {e['last_max']}, "
                              f"above {top}, the highest number the node "
                              f"issued: it echoes a refused reply")
            if e.get("done"):
                issued[e["collection"]] = max(top, e["high"])

    @staticmethod
    def _check_returns(proxy: Proxy, want: List[List[Dict]], where: str):
        calls = proxy.return_calls()
        shown = [[{"collection": r.collection, "end": r.end, "last": r.last,
                   "applied": r.applied} for r in c] for c in calls]
        if len(calls) != len(want) or any(
                len(c) != len(w) for c, w in zip(calls, want)):
            raise Failure(f"{where}: returns came in calls {shown}, "
                          f"expected {want}")
        for c, w in zip(calls, want):
            for r, item in zip(c, w):
                for k, v in item.items():
                    if getattr(r, k) != v:
                        raise Failure(f"{where}: returns came in calls "
                                      f"{shown}, expected {want}")

    @staticmethod
    def _check_returned(proxy: Proxy, want: List[Dict], where: str):
        """The returned ranges, in any order and any grouping into calls."""
        got = [{"collection": r.collection, "end": r.end, "last": r.last,
                "applied": r.applied} for r in proxy.returns]
        key = lambda x: json.dumps(x, sort_keys=True)  # noqa: E731
        if sorted(map(key, got)) != sorted(map(key, want)):
            raise Failure(f"{where}: returned {got}, expected {want} (in "
                          f"any order)")

    def step_clock_step(self, step: Dict, where: str) -> None:
        """Steps a faketime client's wall clock by `seconds` (from where it
        is now), at once or `after_ms` from now (so that it happens during
        the next step)."""
        name = step.get("client", "c1")
        if name not in self.spec.get("faketime", []):
            raise Failure(f"{where}: client {name} is not in the scenario's "
                          f"faketime list")
        path = self._faketime_file(name)
        with open(path) as f:
            offset = int(f.read().strip() or 0)
        text = f"{offset + int(step['seconds']):+d}\n"

        def write() -> None:
            with open(path + ".new", "w") as f:
                f.write(text)
            os.replace(path + ".new", path)

        if step.get("after_ms"):
            timer = threading.Timer(step["after_ms"] / 1000.0, write)
            timer.daemon = True
            timer.start()
        else:
            write()

    def step_sleep_ms(self, step: Dict, where: str) -> None:
        time.sleep(step["ms"] / 1000.0)
