// HiloError: the one error type the client throws (or rejects with).
//
// It carries the gRPC status code the failure maps to, as a number (`code`,
// comparable with @grpc/grpc-js's `status` enum) and as its canonical name
// (`codeName`, e.g. "UNAVAILABLE"), and a message naming the thing that failed
// and why.

/** gRPC status codes, by canonical name (the values of grpc-js's `status`). */
export const StatusCode = {
  OK: 0,
  CANCELLED: 1,
  UNKNOWN: 2,
  INVALID_ARGUMENT: 3,
  DEADLINE_EXCEEDED: 4,
  NOT_FOUND: 5,
  ALREADY_EXISTS: 6,
  PERMISSION_DENIED: 7,
  RESOURCE_EXHAUSTED: 8,
  FAILED_PRECONDITION: 9,
  ABORTED: 10,
  OUT_OF_RANGE: 11,
  UNIMPLEMENTED: 12,
  INTERNAL: 13,
  UNAVAILABLE: 14,
  DATA_LOSS: 15,
  UNAUTHENTICATED: 16,
} as const;

export type StatusCodeName = keyof typeof StatusCode;

const namesByCode: string[] = [];
for (const [name, code] of Object.entries(StatusCode)) namesByCode[code] = name;

/** The canonical name of a gRPC status code ("UNKNOWN" for one outside 0-16). */
export function statusCodeName(code: number): StatusCodeName {
  return (namesByCode[code] ?? 'UNKNOWN') as StatusCodeName;
}

/** A failure of a hilo client call, with the gRPC status code it maps to. */
export class HiloError extends Error {
  /** The gRPC status code (a value of `StatusCode`). */
  readonly code: number;
  /** The code's canonical name, e.g. "UNAVAILABLE". */
  readonly codeName: StatusCodeName;

  constructor(code: number, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'HiloError';
    this.code = code;
    this.codeName = statusCodeName(code);
  }
}

/** UNAVAILABLE and DEADLINE_EXCEEDED: another target (or attempt) may do. */
export function isTransient(code: number): boolean {
  return code === StatusCode.UNAVAILABLE || code === StatusCode.DEADLINE_EXCEEDED;
}

/** Names up to this many characters are quoted whole (a valid name is 1-256 bytes of UTF-8). */
const WHOLE_NAME_CHARS = 256;
/** How many characters of a longer name (never a valid one) a message quotes. */
const LONG_NAME_PREFIX_CHARS = 64;

/**
 * A caller-supplied collection name as messages quote it, escaped as a JSON
 * string (no newline or ESC reaches a log raw): whole when it is at most 256
 * characters, else its first 64 characters then "... (N characters)", so
 * that a huge name gives no huge message.
 */
export function quoteName(name: string): string {
  if (name.length <= WHOLE_NAME_CHARS) return JSON.stringify(name);
  return `${JSON.stringify(name.slice(0, LONG_NAME_PREFIX_CHARS))}... (${name.length} characters)`;
}
