"""Refusals the audit log must account for, for the tests of the exits that
end hilo_server with _Exit (a deaf listener, a lost node tag): every refusal
sent before the exit must be in the log after it, as a line of its own or
counted in a summary line.

As a module: refuse(endpoint, count), audited(path). As a command, for the
shell tests:
  audit_refusals.py refuse PORT COUNT   exits 1 unless all COUNT were refused
  audit_refusals.py check LOG COUNT     exits 1 unless LOG accounts for COUNT
                                        refusals and summarized some of them
"""
import json
import sys

import grpc

import abuse_lib as lib


def refuse(endpoint, count):
    """`count` NextRange calls the guard rail refuses (last_max 2^33 above
    a new collection's Max of 0), all in flight at once: more than the 20
    a second the audit log writes a line each for one address. Returns how
    many were FAILED_PRECONDITION."""
    ch = endpoint.channel()
    call = ch.unary_unary(lib.NEXT, request_serializer=None,
                          response_deserializer=None)
    futures = [call.future(lib.next_range_request(f"audit-{i}", 2**33),
                           timeout=30) for i in range(count)]
    refused = sum(1 for f in futures
                  if f.exception() is not None and
                  f.exception().code() == grpc.StatusCode.FAILED_PRECONDITION)
    ch.close()
    return refused


def audited(path):
    """(refusal lines, refusals counted in summary lines) of an audit log."""
    lines = summarized = 0
    with open(path) as f:
        for line in f:
            record = json.loads(line)
            if "suppressed" in record:
                summarized += record["suppressed"]["count"]
            elif "dropped" in record:
                pass  # lines lost (a log not read in time): not accounted
            else:
                lines += 1
    return lines, summarized


def accounts_for(lines, summarized, count):
    """Whether an audit log with `lines` refusal lines and `summarized`
    refusals in summaries accounts for `count` refusals, some of which
    were summarized (else the test proved nothing about summaries)."""
    return lines + summarized == count and summarized > 0


def main(argv):
    command, where, count = argv[1], argv[2], int(argv[3])
    if command == "refuse":
        refused = refuse(lib.Endpoint(int(where)), count)
        print(f"audit_refusals: {refused} of {count} calls refused")
        return 0 if refused == count else 1
    lines, summarized = audited(where)
    print(f"audit_refusals: {lines} refusal lines, {summarized} in "
          f"summaries; {count} refused")
    return 0 if accounts_for(lines, summarized, count) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
