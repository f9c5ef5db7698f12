// hilo-client: the public API. Everything else in this package is private.
export { HiloClient, CollectionHandle } from './client.js';
export type { HiloClientOptions, HiloId, HiloStats, CallOptions } from './client.js';
export { HiloError, StatusCode, statusCodeName } from './errors.js';
export type { StatusCodeName } from './errors.js';
