import { systemClock } from '../../core/time.js';
import { StationRegistry } from '../../doors/basic-station/registry.js';
import { managementArgs, runVerb, UsageError, type ManagementArgs } from '../args.js';
import type { CliCommand } from '../command.js';
import { openStore } from '../open.js';
import { formatTable } from '../table.js';

/**
 * `outpost station create|list|delete` (docs/lpwan.md, "Connecting a Basics Station gateway"):
 * works on any data directory and while the daemon runs (it closes a deleted station's socket).
 */
export const command: CliCommand = {
  usage: [
    '  station create --eui EUI [--name N] [--json]      a LoRa Basics Station and its token (shown once)',
    '  station list [--json]',
    '  station delete <EUI>                              its socket is closed',
  ].join('\n'),
  run(args, argv, out) {
    const a = managementArgs(args, argv, out);
    const store = openStore(a.config);
    try {
      const stations = new StationRegistry(store.stations, systemClock);
      const verbs = {
        create: () => createStation(a, stations),
        list: () => listStations(a, stations),
        delete: () => deleteStation(a, stations),
      };
      return runVerb(a, verbs, `unknown command: station ${a.sub ?? ''}`);
    } finally {
      store.close();
    }
  },
};

function createStation({ values, show }: ManagementArgs, stations: StationRegistry): number {
  if (!values.eui) throw new UsageError('missing --eui <16 hex digits>');
  const { station, token } = stations.create({ eui: values.eui, name: values.name });
  show({ eui: station.eui, name: station.name, token }, () => `station ${station.eui} registered\ntoken: ${token}\n(shown only now: the station's tc.key holds "Authorization: Bearer ${token}")`);
  return 0;
}

function listStations({ show }: ManagementArgs, stations: StationRegistry): number {
  const list = stations.list();
  show(list, () => formatTable(['EUI', 'NAME', 'CREATED'], list.map((s) => [s.eui, s.name, s.createdOn])));
  return 0;
}

function deleteStation({ positionals, show }: ManagementArgs, stations: StationRegistry): number {
  const eui = positionals[1];
  if (!eui) throw new UsageError('missing <EUI>');
  const deleted = stations.delete(eui);
  show({ deleted }, () => `station ${deleted} deleted (its token no longer works)`);
  return 0;
}
