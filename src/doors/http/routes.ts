// The device API (docs/api.md, "Paths"): one module per resource under routes/, each built from
// the same dependencies. Handlers check rights themselves: the rules differ per path.
import type { Route } from './router.js';
import type { ApiDeps } from './routes/deps.js';
import { healthRoutes } from './routes/health.js';
import { whoamiRoutes } from './routes/whoami.js';
import { deviceRoutes } from './routes/devices.js';
import { assetRoutes } from './routes/assets.js';
import { assetStateRoutes } from './routes/asset-states.js';
import { deviceStateRoutes } from './routes/device-states.js';
import { commandRoutes } from './routes/commands.js';
import { codecRoutes } from './routes/codec.js';
import { redecodeRoutes } from './routes/redecode.js';
import { uplinkRoutes } from './routes/uplinks.js';
import { lorawanRoutes } from './routes/lorawan.js';
import { tokenRoutes } from './routes/tokens.js';

export type { ApiDeps } from './routes/deps.js';

/** Every path of docs/api.md. No two patterns match the same path, so the order does not matter. */
export function apiRoutes(deps: ApiDeps): Route[] {
  return [
    ...healthRoutes(deps),
    ...whoamiRoutes(),
    ...deviceRoutes(deps),
    ...assetRoutes(deps),
    ...assetStateRoutes(deps),
    ...deviceStateRoutes(deps),
    ...commandRoutes(deps),
    ...codecRoutes(deps),
    ...redecodeRoutes(deps),
    ...uplinkRoutes(deps),
    ...lorawanRoutes(deps),
    ...tokenRoutes(deps),
  ];
}
