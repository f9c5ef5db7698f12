// Calls a hilo server through the generated TypeScript stubs (ts-proto,
// @grpc/grpc-js).
//
//   examples/node/build.sh build/gen/node build/node-example
//   node build/node-example/js/hilo_example.js 127.0.0.1:50051 [COLLECTION]
//
// build.sh compiles this file with the generated code, which it places in
// ./gen beside it. Uses a new collection (a unique name unless one is given),
// so the ranges are exact: 1-32, then 33-64 for a second client, 65-128 for a
// client that reports its previous range, and after handing back all of that
// range but its first number, 66-97. Each range carries a range_token (never
// 0); the return sends it and is applied, the same return sent again is
// refused (a node applies a return at most once), and a return without a
// token fails with FAILED_PRECONDITION. A bad collection name must fail with
// INVALID_ARGUMENT. Exits 1 on any difference.
import { credentials, Metadata, ServiceError, status } from "@grpc/grpc-js";
import { isDeepStrictEqual, inspect } from "node:util";
import {
  HiLoClient,
  NextRangeRequest,
  NextRangeResponse,
  ReturnRangeRequest,
  ReturnRangeResponse,
} from "./gen/hilo/v1/hilo";

// A check that did not hold; main's caller prints it. Thrown rather than
// exiting on the spot, so the client is closed on the way out.
class CheckFailed extends Error {}

function check(what: string, got: unknown, want: unknown): void {
  if (!isDeepStrictEqual(got, want)) {
    throw new CheckFailed(`${what}: got ${inspect(got)}, want ${inspect(want)}`);
  }
  console.log(`ok   ${what}: ${inspect(got)}`);
}

function bounds(r: NextRangeResponse): [bigint, bigint] {
  return [r.low, r.high];
}

function deadline(): { deadline: Date } {
  return { deadline: new Date(Date.now() + 10_000) };
}

function nextRange(client: HiLoClient, request: NextRangeRequest): Promise<NextRangeResponse> {
  return new Promise((resolve, reject) => {
    client.nextRange(request, new Metadata(), deadline(), (err, response) =>
      err ? reject(err) : resolve(response),
    );
  });
}

function returnRange(client: HiLoClient, request: ReturnRangeRequest): Promise<ReturnRangeResponse> {
  return new Promise((resolve, reject) => {
    client.returnRange(request, new Metadata(), deadline(), (err, response) =>
      err ? reject(err) : resolve(response),
    );
  });
}

async function main(): Promise<void> {
  const target = process.argv[2];
  if (!target) {
    console.error("usage: node hilo_example.js HOST:PORT [COLLECTION]");
    process.exitCode = 2;
    return;
  }
  const collection = process.argv[3] ?? `example-node-${process.pid}-${process.hrtime.bigint()}`;
  const client = new HiLoClient(target, credentials.createInsecure());
  const request = (fields: Partial<NextRangeRequest> = {}): NextRangeRequest => ({
    ...NextRangeRequest.fromPartial({ collection }),
    ...fields,
  });
  try {
    const first = await nextRange(client, request());
    check("first range", bounds(first), [1n, 32n]);
    check("node tag", first.nodeTag, "A");
    check("range_at set", first.rangeAt !== undefined, true);

    const second = await nextRange(client, request());
    check("second range starts after the first", second.low, first.high + 1n);
    check("second range", bounds(second), [33n, 64n]);

    const third = await nextRange(
      client,
      request({
        lastSize: second.high - second.low + 1n,
        lastRangeAt: second.rangeAt,
        lastMax: second.high,
      }),
    );
    check("third range (size doubled)", bounds(third), [65n, 128n]);

    // fixed64 as bigint: every token fits, and 0n means "none".
    check("range_token set", third.rangeToken !== 0n, true);

    // Used only 65: hand back 66-128, with the range's token.
    const tail: ReturnRangeRequest = {
      collection,
      end: third.high,
      last: third.low,
      nodeTag: third.nodeTag,
      rangeToken: third.rangeToken,
    };
    const returned = await returnRange(client, tail);
    check("return of the unused tail applied", returned.applied, true);
    check("max after the return", returned.max, 65n);
    // The token is spent: a retried or duplicated return changes nothing.
    const again = await returnRange(client, tail);
    check("the same return again is refused", [again.applied, again.max], [false, 65n]);
    let noToken: status = status.OK;
    try {
      await returnRange(client, { ...tail, rangeToken: 0n });
    } catch (err) {
      noToken = (err as ServiceError).code;
    }
    check("return without a range_token", status[noToken], "FAILED_PRECONDITION");
    check("next range continues after the return", bounds(await nextRange(client, request())), [66n, 97n]);

    for (const bad of ["", "bad\ncollection", "x".repeat(257)]) {
      let code: status = status.OK;
      try {
        await nextRange(client, request({ collection: bad }));
      } catch (err) {
        code = (err as ServiceError).code;
      }
      check(`bad collection ${inspect(bad.slice(0, 12))}`, status[code], "INVALID_ARGUMENT");
    }
    console.log("node example: all checks passed");
  } finally {
    client.close();
  }
}

// Failures set the exit code and let Node exit once the client is closed.
main().catch((err) => {
  console.log("FAIL", err instanceof CheckFailed ? err.message : err);
  process.exitCode = 1;
});
