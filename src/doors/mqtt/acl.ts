import { canReadAny, type Principal } from '../../core/access.js';
import { TEMPLATES, matchTemplate, type Bindings, type TemplateName } from '../../wire/topics.js';

/** Looks up the device an asset id belongs to (the catalog, cached). */
export type AssetOwner = (assetId: string) => string | undefined;

const APP_READABLE: ReadonlySet<TemplateName> = new Set(['asset-state', 'asset-feed', 'device-state', 'errors', 'events']);

function deviceMayRead(principal: Principal, name: TemplateName, b: Bindings, ownerOf: AssetOwner): boolean {
  const own = principal.deviceId;
  if (!own) return false;
  if (name === 'asset-id-command') return b.A !== undefined && ownerOf(b.A) === own;
  return b.D === own;
}

/**
 * Whether a principal may subscribe to a filter (docs/api.md, "Authentication and rights"; docs/mqtt.md). The filter is compared with every
 * topic template the service publishes on: it is granted only if it can match at least one, and every
 * template it can match is one the principal may read with the variables the filter leaves open.
 *
 * - device token: its own command, state, feed, errors and events topics; wildcards only below
 *   `device/<own id>/`; `asset/<AssetID>/command` only by its own asset's literal id.
 * - app token with `read` (or `admin`): any state, feed, errors and events topic, wildcards included;
 *   never command topics (so `#` and `device/+/#` are refused: they would include commands).
 * - `$` topics (`$SYS`) never.
 */
export function maySubscribe(principal: Principal, filter: string, ownerOf: AssetOwner): boolean {
  if (filter.length === 0 || filter.charCodeAt(0) === 36 /* $ */) return false;
  const levels = filter.split('/');
  let matched = false;
  for (const template of TEMPLATES) {
    const bindings = matchTemplate(levels, template);
    if (!bindings) continue;
    matched = true;
    if (principal.kind === 'device') {
      if (!deviceMayRead(principal, template.name, bindings, ownerOf)) return false;
    } else if (principal.kind === 'app') {
      if (!canReadAny(principal) || !APP_READABLE.has(template.name)) return false;
    } else {
      return false;
    }
  }
  return matched;
}
