// hilo-client: the public API. Everything else in this package is private.
export { HiloClient } from './client.js';
export { CollectionHandle } from './handle.js';
export type { HiloClientOptions, HiloId, HiloStats, CallOptions } from './types.js';
export { HiloError, StatusCode, statusCodeName } from './errors.js';
export type { StatusCodeName } from './errors.js';
