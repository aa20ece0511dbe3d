// SPDX-License-Identifier: Apache-2.0
// Typed errors carrying the API's {code, message} and the HTTP status.

/** Any failure reported by isolad or on the way to it. `status` is undefined when no HTTP
 * response was received (transport errors) or the error arrived inside a stream. */
export class IsolaError extends Error {
  readonly code: string;
  readonly status?: number;

  constructor(message: string, code = "internal", status?: number) {
    super(message);
    this.name = new.target.name;
    this.code = code;
    this.status = status;
  }
}

/** 400: invalid, not_dir, is_dir. */
export class InvalidError extends IsolaError {}
/** 401: missing or wrong bearer token (TCP). */
export class UnauthorizedError extends IsolaError {}
/** 403. */
export class ForbiddenError extends IsolaError {}
/** 403 quota_exceeded: the tenant's quota would be exceeded. */
export class QuotaExceededError extends ForbiddenError {}
/** 429 rate_limited: too many creations; retryAfter is the server's Retry-After (s). */
export class RateLimitedError extends IsolaError {
  retryAfter?: number;
}
/** 404: unknown sandbox, process, file, template or program. */
export class NotFoundError extends IsolaError {}
/** 410 sandbox_ended: the sandbox existed and ended (isolad keeps a tombstone, 24 h by
 * default). endReason: expired, idle, destroyed or error; endedAt: unix time; detail: e.g.
 * "ttl 3s". A NotFoundError, so code that catches a missing sandbox still does. */
export class SandboxEndedError extends NotFoundError {
  endReason?: string;
  endedAt?: number;
  detail?: string | null;
}
/** 405. */
export class MethodNotAllowedError extends IsolaError {}
/** 409: conflict, exists, busy. */
export class ConflictError extends IsolaError {}
/** 409 name_taken: another live sandbox of the tenant holds the name (the message names it). */
export class NameTakenError extends ConflictError {}
/** 413. */
export class TooLargeError extends IsolaError {}
/** 416. */
export class RangeNotSatisfiableError extends IsolaError {}
/** 500. */
export class InternalError extends IsolaError {}
/** 501: e.g. the microvm tier in a build without it. */
export class NotSupportedError extends IsolaError {}
/** 503, or isolad unreachable (status undefined). */
export class UnavailableError extends IsolaError {}
/** 504, or a bounded wait of this SDK that ran out. */
export class TimeoutError extends IsolaError {}
/** 507. */
export class NoSpaceError extends IsolaError {}
/** 424 failed_dependency: the template lacks what the operation needs (the code interpreter:
 * python3 with jupyter_client and ipykernel). */
export class DependencyError extends IsolaError {}
/** isolad sent something this SDK cannot read. */
export class ProtocolError extends IsolaError {}

type ErrorClass = new (message: string, code?: string, status?: number) => IsolaError;

const BY_CODE: Record<string, ErrorClass> = {
  invalid: InvalidError,
  not_dir: InvalidError,
  is_dir: InvalidError,
  unauthorized: UnauthorizedError,
  forbidden: ForbiddenError,
  quota_exceeded: QuotaExceededError,
  rate_limited: RateLimitedError,
  not_found: NotFoundError,
  sandbox_ended: SandboxEndedError,
  name_taken: NameTakenError,
  method_not_allowed: MethodNotAllowedError,
  conflict: ConflictError,
  exists: ConflictError,
  busy: ConflictError,
  too_large: TooLargeError,
  range_not_satisfiable: RangeNotSatisfiableError,
  internal: InternalError,
  not_supported: NotSupportedError,
  unavailable: UnavailableError,
  timeout: TimeoutError,
  no_space: NoSpaceError,
  failed_dependency: DependencyError,
};

const BY_STATUS: Record<number, ErrorClass> = {
  400: InvalidError,
  401: UnauthorizedError,
  403: ForbiddenError,
  404: NotFoundError,
  410: SandboxEndedError,
  405: MethodNotAllowedError,
  409: ConflictError,
  429: RateLimitedError,
  413: TooLargeError,
  416: RangeNotSatisfiableError,
  500: InternalError,
  501: NotSupportedError,
  503: UnavailableError,
  504: TimeoutError,
  507: NoSpaceError,
};

/** The error for an API error: chosen by code, else by status. body: the whole error object
 * (a 410 carries end_reason, ended_at, detail). */
export function errorFor(
  code: string | undefined | null,
  message: string,
  status?: number,
  body?: Record<string, any>,
): IsolaError {
  const cls = (code && BY_CODE[code]) || (status && BY_STATUS[status]) || IsolaError;
  const e = new cls(message, code || "internal", status);
  if (e instanceof SandboxEndedError && body) {
    e.endReason = body.end_reason;
    e.endedAt = body.ended_at;
    e.detail = body.detail;
  }
  return e;
}
