// The hilo.v1.HiLo service as @grpc/grpc-js sees it: a client constructor
// made with @grpc/proto-loader from the descriptor the build embeds, and the
// message shapes it produces. 64-bit fields travel as decimal strings
// (proto-loader's `longs: String`), so none is ever rounded; the client turns
// them into bigint.

import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { descriptor } from './descriptor.js';

/** google.protobuf.Timestamp as proto-loader gives it (seconds as a string). */
export interface Timestamp {
  seconds: string;
  nanos: number;
}

export interface NextRangeRequest {
  collection: string;
  last_size: string;
  last_range_at: Timestamp | null;
  last_max: string;
}

export interface NextRangeResponse {
  low: string;
  high: string;
  node_tag: string;
  range_at: Timestamp | null;
  range_token: string;
}

export interface ReturnRangeRequest {
  collection: string;
  end: string;
  last: string;
  node_tag: string;
  range_token: string;
}

export interface ReturnRangeResponse {
  applied: boolean;
  max: string;
}

export interface ReturnRangeResult {
  code: number;
  message: string;
  applied: boolean;
  max: string;
}

export interface ReturnRangesResponse {
  results: ReturnRangeResult[];
}

type Unary<Req, Res> = (
  request: Req,
  options: grpc.CallOptions,
  callback: (error: grpc.ServiceError | null, response?: Res) => void,
) => grpc.ClientUnaryCall;

/** A stub for one target: the three RPCs of hilo.v1.HiLo. */
export interface HiLoStub extends grpc.Client {
  NextRange: Unary<NextRangeRequest, NextRangeResponse>;
  ReturnRange: Unary<ReturnRangeRequest, ReturnRangeResponse>;
  ReturnRanges: Unary<{ returns: ReturnRangeRequest[] }, ReturnRangesResponse>;
}

export type HiLoStubConstructor = new (
  address: string,
  credentials: grpc.ChannelCredentials,
  options?: grpc.ChannelOptions,
) => HiLoStub;

let constructor: HiLoStubConstructor | undefined;

/** The hilo.v1.HiLo service definition (for the client and for in-process servers). */
export function hiloServiceDefinition(): grpc.ServiceDefinition {
  const definition = protoLoader.fromJSON(descriptor as Parameters<typeof protoLoader.fromJSON>[0], {
    keepCase: true,
    longs: String,
    enums: String,
    defaults: true,
    oneofs: true,
  });
  return definition['hilo.v1.HiLo'] as grpc.ServiceDefinition;
}

/** The hilo.v1.HiLo client constructor (made once, on first use). */
export function hiloStubConstructor(): HiLoStubConstructor {
  if (constructor === undefined) {
    constructor = grpc.makeGenericClientConstructor(
      hiloServiceDefinition(),
      'HiLo',
    ) as unknown as HiLoStubConstructor;
  }
  return constructor;
}
