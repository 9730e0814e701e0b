// The gateway at a glance: version, uptime, storage, radio sources, the upstream link, and on a
// central the gateways behind it. Everything comes from /healthz, /metrics and /gateways.
import { get } from './api.js';
import { formatTime, formatValue, h, table } from './dom.js';

function parseMetrics(text) {
  const values = new Map();
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][\w:]*)(\{[^}]*\})?\s+(\S+)/.exec(line);
    if (m) values.set(m[1] + (m[2] ?? ''), Number(m[3]));
  }
  return values;
}

const mib = (bytes) => `${(bytes / 1048576).toFixed(1)} MiB`;

function kv(entries) {
  return h('dl', { class: 'kv card' }, ...entries.flatMap(([k, v]) => [h('dt', {}, k), h('dd', {}, v)]));
}

function uptime(seconds) {
  const d = Math.floor(seconds / 86400);
  const hrs = Math.floor((seconds % 86400) / 3600);
  const min = Math.floor((seconds % 3600) / 60);
  return `${d ? `${d} d ` : ''}${hrs} h ${min} min`;
}

/** A gateway's managed devices, in words (docs/sync.md, "Manage a fleet from the central"). */
function configCells(config) {
  if (!config) return [h('td', {}, '—'), h('td', {}, '—'), h('td', {}, '—')];
  return [
    h('td', { dataset: { field: 'managed' } }, String(config.managed)),
    h('td', { dataset: { field: 'pending' }, class: config.pending > 0 ? 'warn' : '' }, config.pending > 0 ? `${config.pending} to apply` : 'none'),
    h('td', { dataset: { field: 'last-applied' }, title: config.lastAppliedAt ?? '' }, config.lastAppliedAt ? formatTime(config.lastAppliedAt) : 'never'),
  ];
}

/** `#/gateway/<GatewayID>` (a device page's link) opens this page with that gateway's row marked. */
export async function gatewayPage(container, [selected] = []) {
  const health = await fetch('/healthz').then((r) => r.json());
  const metrics = parseMetrics(await fetch('/metrics').then((r) => r.text()));
  container.append(
    h('h1', {}, 'Gateway'),
    kv([
      ['Status', h('span', { class: `badge ${health.status === 'ok' ? 'ok' : 'bad'}` }, health.status)],
      ['Version', health.version],
      ['Role', health.role],
      ['Uptime', uptime(health.uptimeSeconds ?? 0)],
      ['Database size', metrics.has('outpost_store_bytes') ? mib(metrics.get('outpost_store_bytes')) : '—'],
      ['States stored since start', String(metrics.get('outpost_states_ingested_total') ?? '—')],
      ['States refused since start', String(metrics.get('outpost_states_refused_total') ?? '—')],
      ['Memory (RSS)', metrics.has('process_resident_memory_bytes') ? mib(metrics.get('process_resident_memory_bytes')) : '—'],
    ]),
  );
  if (health.store) container.append(h('h2', {}, 'Storage'), kv(Object.entries(health.store).map(([k, v]) => [k, formatValue(v)])));
  const central = health.role === 'central';
  const self = central ? 'this central' : 'this gateway';
  const radio = health.radio;
  container.append(h('h2', {}, 'Radio'));
  const sources = radio && Array.isArray(radio.sources) ? radio.sources : [];
  if (radio && typeof radio.devices === 'number') container.append(h('p', {}, `${radio.devices} LoRaWAN device${radio.devices === 1 ? '' : 's'} on ${self}'s own radio.`));
  if (sources.length > 0) {
    container.append(table(['Source', 'Up', 'Frames received', 'Frames sent', 'Errors'], sources.map((s) => h('tr', {}, h('td', {}, s.source), h('td', {}, s.up ? 'yes' : 'no'), h('td', {}, String(s.framesReceived)), h('td', {}, String(s.framesSent)), h('td', {}, String(s.errors)))), { label: 'Radio sources' }));
    const radioGateways = listRadioGateways(sources);
    if (radioGateways.length > 0) {
      container.append(
        h('h3', {}, 'LoRa gateways'),
        table(['Kind', 'EUI', 'Name', 'Connected', 'Last heard'], radioGateways.map((g) => h('tr', {}, h('td', {}, g.kind), h('td', { class: 'mono' }, g.eui), h('td', {}, g.name), h('td', {}, g.connected ? 'yes' : 'no'), h('td', {}, g.lastHeard ?? '—'))), { label: 'LoRa gateways' }),
      );
    }
  } else {
    container.append(h('p', { class: 'muted' }, central ? 'No radio source on this central: its devices reach it through their gateways (below).' : 'No radio source is configured on this gateway.'));
  }
  container.append(h('h2', {}, 'Upstream link'));
  const up = health.upstream;
  if (central && !(up && up.link !== 'off')) {
    container.append(h('p', { class: 'muted' }, 'This central is where gateways send their data: it has no upstream of its own.'));
  } else if (up && up.link !== 'off') {
    container.append(kv([
      ['Link', h('span', { class: `badge ${up.link === 'up' ? 'ok' : 'bad'}` }, up.link)],
      ['Outbox depth', String(up.depth ?? up.outbox?.depth ?? '—')],
      ['Oldest waiting', String(up.oldestAt ?? up.outbox?.oldestAt ?? '—')],
      ...Object.entries(up).filter(([k]) => !['link', 'depth', 'oldestAt', 'outbox'].includes(k)).map(([k, v]) => [k, formatValue(v)]),
    ]));
  } else {
    container.append(h('p', { class: 'muted' }, 'No upstream is configured: this gateway keeps its data locally.'));
  }
  if (health.role === 'central') {
    const gateways = await get('/gateways').catch(() => null);
    container.append(h('h2', {}, 'Gateways'));
    if (gateways) {
      const rows = gateways.map((g) =>
        h('tr', { id: `gateway-${g.id}`, dataset: { gateway: g.id }, 'aria-current': g.id === selected ? 'true' : undefined, class: g.id === selected ? 'selected' : undefined },
          h('th', { scope: 'row' }, g.name), h('td', { class: 'mono' }, g.id), h('td', {}, g.connected ? 'yes' : 'no'), h('td', { title: g.lastSeen ?? '' }, g.lastSeen ? formatTime(g.lastSeen) : '—'), h('td', {}, String(g.devices?.length ?? 0)),
          ...configCells(g.config)));
      container.append(
        h('p', { class: 'muted' }, 'Managed devices are those created or assigned here; pending are the changes a gateway has yet to apply (it catches up when it reconnects).'),
        table(['Name', 'ID', 'Connected', 'Last seen', 'Devices', 'Managed', 'Pending', 'Last applied'], rows, { label: 'Gateways' }),
      );
      // Scrolled to once the page is on screen (the router attaches the container after this returns).
      if (selected) requestAnimationFrame(() => document.getElementById(`gateway-${selected}`)?.scrollIntoView({ block: 'center' }));
    } else container.append(h('p', { class: 'muted' }, 'Listing gateways needs the admin scope.'));
  }
}

/**
 * Packet forwarders (the most recently heard, as /healthz lists them) and connected Basics
 * Stations side by side. Only text from the daemon's own summary; nothing here is HTML.
 */
function listRadioGateways(sources) {
  const rows = [];
  for (const s of sources) {
    const detail = s.detail ?? {};
    if (s.source === 'gwmp' && Array.isArray(detail.gateways?.recent)) {
      for (const g of detail.gateways.recent) rows.push({ kind: 'Packet forwarder', eui: String(g.eui), name: '', connected: g.online === true, lastHeard: g.lastSeen });
    }
    if (s.source === 'basicStation' && Array.isArray(detail.stations)) {
      for (const st of detail.stations) rows.push({ kind: 'Basics Station', eui: String(st.eui), name: String(st.name ?? ''), connected: true, lastHeard: st.lastUplinkAt ?? st.connectedAt });
    }
  }
  return rows;
}
