// Transport: a HiloClient's targets and the calls to them. NextRange with
// failover from the preferred target (a reply the caller refuses counts as
// that target failing), and unary calls retried on UNAVAILABLE or
// DEADLINE_EXCEEDED, every deadline measured on the monotonic clock.
// Private to the package.

import type * as grpc from '@grpc/grpc-js';
import { HiloError, StatusCode, isTransient, quoteName, statusCodeName } from './errors.js';
import type { HiLoStub, NextRangeRequest, NextRangeResponse } from './proto.js';

const RETURN_ATTEMPTS = 3;

/** A NextRange reply the caller accepted: what `accept` made of it, the reply, and its target. */
export interface Accepted<T> {
  value: T;
  response: NextRangeResponse;
  target: number;
  /** Another target than the preferred one answered. */
  failedOver: boolean;
}

/**
 * Whether `code` may be a node's refusal of the previous range `request`
 * reports: the last_max guard rail (FAILED_PRECONDITION) or a field it finds
 * malformed (INVALID_ARGUMENT).
 */
function echoRefused(code: number, request: NextRangeRequest): boolean {
  const echoes = request.last_max !== '0' || request.last_size !== '0' || request.last_range_at != null;
  return echoes && (code === StatusCode.FAILED_PRECONDITION || code === StatusCode.INVALID_ARGUMENT);
}

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

export class Transport {
  /** The targets as given; indexes into this are the `target` of a range. */
  readonly targets: readonly string[];
  /** One stub (channel) per target. */
  readonly stubs: readonly HiLoStub[];
  private readonly rpcDeadlineMs: number;
  private readonly now: () => number;
  private preferred = 0;

  constructor(targets: readonly string[], stubs: readonly HiLoStub[], rpcDeadlineMs: number, now: () => number) {
    this.targets = targets;
    this.stubs = stubs;
    this.rpcDeadlineMs = rpcDeadlineMs;
    this.now = now;
  }

  /**
   * One NextRange, with failover across targets starting at the preferred
   * one: a target that fails with UNAVAILABLE or DEADLINE_EXCEEDED, or whose
   * reply `accept` refuses (it returns why, as a string), is passed over;
   * the target that gives an accepted reply becomes the preferred one.
   * Rejects with HiloError: the server's code for any other failure;
   * INTERNAL naming every target when a reply was refused and none was
   * accepted; otherwise UNAVAILABLE naming every target.
   */
  async nextRange<T extends object>(
    request: NextRangeRequest,
    accept: (response: NextRangeResponse) => T | string,
  ): Promise<Accepted<T>> {
    if (LONE_SURROGATE.test(request.collection)) {
      // It cannot be sent as UTF-8 (grpc-js fails the call with an empty
      // UNIMPLEMENTED): refused here, as the server would (CONTRACT.md R13).
      throw new HiloError(
        StatusCode.INVALID_ARGUMENT,
        `collection name ${quoteName(request.collection)} holds an unpaired surrogate, which is no Unicode character; a collection is 1-256 bytes of UTF-8 without control characters`,
      );
    }
    const failures: string[] = [];
    let anyInvalid = false;
    const first = this.preferred;
    for (let i = 0; i < this.stubs.length; i++) {
      const index = (first + i) % this.stubs.length;
      const target = this.targets[index];
      let response: NextRangeResponse;
      try {
        try {
          response = await this.unary<NextRangeRequest, NextRangeResponse>(
            this.stubs[index].NextRange,
            this.stubs[index],
            request,
            this.rpcDeadlineMs,
          );
        } catch (e) {
          if (!echoRefused((e as grpc.ServiceError).code, request)) throw e;
          // A node far behind the one that issued the range reported
          // (CONTRACT.md R17): asked again without it. Its IDs carry its own
          // tag, and a range at or below what this client has from that very
          // node is still refused by `accept`: none repeats.
          const bare: NextRangeRequest = {
            collection: request.collection,
            last_size: '0',
            last_range_at: null,
            last_max: '0',
          };
          response = await this.unary<NextRangeRequest, NextRangeResponse>(
            this.stubs[index].NextRange,
            this.stubs[index],
            bare,
            this.rpcDeadlineMs,
          );
        }
      } catch (e) {
        const err = e as grpc.ServiceError;
        if (isTransient(err.code)) {
          failures.push(`${target}: ${statusCodeName(err.code)}: ${err.details}`);
          continue;
        }
        throw new HiloError(err.code, `${target}: NextRange for ${quoteName(request.collection)} failed: ${err.details}`, { cause: e });
      }
      const checked = accept(response);
      if (typeof checked === 'string') {
        anyInvalid = true;
        failures.push(`${target}: ${checked}`);
        continue;
      }
      this.preferred = index;
      return { value: checked, response, target: index, failedOver: i > 0 };
    }
    const code = anyInvalid ? StatusCode.INTERNAL : StatusCode.UNAVAILABLE;
    throw new HiloError(
      code,
      anyInvalid
        ? `no hilo server gave a usable range of ${quoteName(request.collection)}: ${failures.join('; ')}`
        : `no hilo server answered NextRange for ${quoteName(request.collection)}: ${failures.join('; ')}`,
    );
  }

  /** A unary call retried on UNAVAILABLE / DEADLINE_EXCEEDED, all attempts within rpcDeadlineMs. */
  async withRetries<Req, Res>(method: () => Function, stub: HiLoStub, request: Req): Promise<Res> {
    const end = this.now() + this.rpcDeadlineMs;
    for (let attempt = 1; ; attempt++) {
      const left = end - this.now();
      // Each attempt gets an equal share of the time left.
      const budget = left / (RETURN_ATTEMPTS - attempt + 1);
      try {
        return await this.unary<Req, Res>(method(), stub, request, budget);
      } catch (e) {
        const err = e as grpc.ServiceError;
        if (!isTransient(err.code) || attempt >= RETURN_ATTEMPTS || end - this.now() <= 1) throw e;
      }
    }
  }

  /** Closes every channel. */
  close(): void {
    for (const stub of this.stubs) stub.close();
  }

  /** One unary call with a deadline `budgetMs` from now (measured on the monotonic clock). */
  private unary<Req, Res>(method: Function, stub: HiLoStub, request: Req, budgetMs: number): Promise<Res> {
    // grpc-js takes a wall-clock deadline; it is derived from a monotonic
    // budget at the moment of the call, so a clock step cannot stretch it.
    const deadline = Date.now() + Math.max(1, Math.floor(budgetMs));
    return new Promise<Res>((resolve, reject) => {
      method.call(stub, request, { deadline }, (error: grpc.ServiceError | null, response?: Res) => {
        if (error) reject(error);
        else resolve(response as Res);
      });
    });
  }
}
