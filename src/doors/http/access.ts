// The door's authorization checks that are the same on every path; the rules themselves are in core/access.ts.
import { ServiceError } from '../../core/errors.js';
import { isAdmin } from '../../core/access.js';
import type { RequestContext } from './router.js';

export function forbid(message: string): never {
  throw new ServiceError('FORBIDDEN', message);
}

/** 403 unless the request's token is an application token with the "admin" scope. */
export function requireAdmin(ctx: RequestContext, message = 'this needs an application token with the "admin" scope'): void {
  if (!isAdmin(ctx.principal())) forbid(message);
}
