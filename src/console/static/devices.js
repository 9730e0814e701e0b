// The device list and a device's page: assets with their latest values, history plots, raw uplinks,
// command forms for actuators, and live updates.
import { get, openEventStream } from './api.js';
import { ago, field, formatTime, formatValue, h, table } from './dom.js';
import { commandForm } from './command-form.js';
import { loadPlotting, plotHistory } from './plot.js';
import { downlinkText, gatewayLink, uplinkText, viaGateway } from './radio.js';

export async function devicesPage(container) {
  const devices = await get('/devices');
  const search = h('input', { type: 'search', placeholder: 'name or ID' });
  let sortKey = 'name';
  let ascending = true;
  const tbody = h('tbody');
  const render = () => {
    const q = search.value.trim().toLowerCase();
    const rows = devices
      .filter((d) => !q || d.name.toLowerCase().includes(q) || d.id.toLowerCase().includes(q))
      .sort((a, b) => {
        const x = a[sortKey] ?? '';
        const y = b[sortKey] ?? '';
        return (x < y ? -1 : x > y ? 1 : 0) * (ascending ? 1 : -1);
      });
    tbody.replaceChildren(
      ...rows.map((d) =>
        h(
          'tr',
          {},
          h('td', {}, h('a', { href: `#/device/${encodeURIComponent(d.id)}` }, d.name)),
          h('td', { class: 'mono' }, d.id),
          h('td', {}, linkBadge(d.link)),
          h('td', { title: d.lastSeen ?? '' }, ago(d.lastSeen)),
        ),
      ),
    );
    if (rows.length === 0) tbody.replaceChildren(h('tr', {}, h('td', { colspan: 4, class: 'muted' }, devices.length ? 'No device matches.' : 'No device yet.')));
  };
  const sortButton = (key, label) =>
    h('button', {
      type: 'button',
      class: 'sort',
      onclick: () => {
        ascending = sortKey === key ? !ascending : true;
        sortKey = key;
        render();
      },
    }, label);
  search.addEventListener('input', render);
  render();
  container.append(
    h('h1', {}, 'Devices'),
    h('div', { class: 'row' }, h('div', { class: 'grow' }, field('Search devices', search))),
    h(
      'div',
      { class: 'table-wrap' },
      h('table', { 'aria-label': 'Devices' },
        h('thead', {}, h('tr', {},
          h('th', { scope: 'col' }, sortButton('name', 'Name')),
          h('th', { scope: 'col' }, sortButton('id', 'ID')),
          h('th', { scope: 'col' }, 'Link'),
          h('th', { scope: 'col' }, sortButton('lastSeen', 'Last seen')))),
        tbody),
    ),
  );
}

function linkBadge(link) {
  if (!link || link.type === 'ip') return h('span', { class: 'badge' }, 'IP');
  if (link.type === 'lorawan') {
    const signal = link.rssi !== undefined ? ` ${link.rssi} dBm, SNR ${link.snr} dB` : link.at ? '' : ' (no uplink yet)';
    return h('span', { class: 'badge', title: link.at ? `last uplink ${link.at}` : '' }, `LoRa${signal}`);
  }
  if (link.type === 'gateway') return h('span', { class: 'badge', title: `gateway ID ${link.gatewayId}` }, 'behind gateway ', gatewayLink(link.gatewayId, link.gatewayName));
  return h('span', { class: 'badge' }, link.type);
}

const isNumeric = (asset) => asset.profile && (asset.profile.type === 'number' || asset.profile.type === 'integer');

export async function devicePage(container, [deviceId], { can }) {
  await loadPlotting();
  const device = await get(`/device/${encodeURIComponent(deviceId)}`);
  const base = `/device/${encodeURIComponent(device.id)}`;
  const latestCells = new Map();
  const plots = new Map();
  const assetRows = device.assets.map((asset) => {
    const value = h('td', { class: 'value' }, asset.state ? formatValue(asset.state.value) : '—');
    const at = h('td', {}, asset.state ? formatTime(asset.state.at) : '—');
    latestCells.set(asset.name, { value, at });
    return h('tr', { dataset: { asset: asset.name } }, h('th', { scope: 'row' }, asset.name), h('td', {}, asset.is), h('td', { class: 'value' }, JSON.stringify(asset.profile)), value, at);
  });

  const liveStatus = h('span', { class: 'muted', role: 'status' }, 'Live: connecting…');
  const managed = managedText(device);
  container.append(
    h('h1', {}, device.title || device.name),
    h('dl', { class: 'kv card' }, h('dt', {}, 'ID'), h('dd', { class: 'mono' }, device.id), h('dt', {}, 'Name'), h('dd', {}, device.name), h('dt', {}, 'Description'), h('dd', {}, device.description ?? '—'), h('dt', {}, 'Created'), h('dd', {}, formatTime(device.createdOn)), h('dt', {}, 'Link'), h('dd', { dataset: { field: 'link' } }, linkBadge(device.link)),
      managed && [h('dt', {}, 'Managed'), h('dd', { dataset: { field: 'managed' } }, managed)]),
    liveStatus,
    h('h2', {}, 'Assets'),
    table(['Name', 'Kind', 'Profile', 'Latest value', 'At'], assetRows, { label: 'Assets' }),
  );

  // Only a device with LoRaWAN settings has any (an IP device's page must not ask and get a 404);
  // reading them needs the admin scope.
  if (device.link?.type === 'lorawan' && can('admin')) {
    const lorawan = await get(`${base}/lorawan`).catch(() => null);
    if (lorawan) container.append(h('h2', {}, 'LoRaWAN'), loraSummary(lorawan));
  }

  const radio = radioSection(device, await get(`${base}/radio`).catch(() => null));
  container.append(radio.element);

  const actuators = device.assets.filter((a) => a.is === 'actuator');
  if (can('command') && actuators.length > 0) {
    container.append(h('h2', {}, 'Commands'), ...actuators.map((asset) => commandForm(device, asset)));
  }

  const rangeSelect = h('select', {}, ...[['1', 'Last hour'], ['24', 'Last 24 hours'], ['168', 'Last 7 days'], ['720', 'Last 30 days']].map(([v, t]) => h('option', { value: v, selected: v === '24' }, t)));
  const history = h('div');
  container.append(h('h2', {}, 'History'), h('div', { class: 'row' }, field('Time range', rangeSelect), h('p', { class: 'muted' }, 'Drag across a plot to zoom in; double-click to zoom out.')), history);
  const loadHistory = async () => {
    const from = new Date(Date.now() - Number(rangeSelect.value) * 3600_000).toISOString();
    history.replaceChildren();
    plots.clear();
    for (const asset of device.assets) {
      const section = h('section', { class: 'card', 'aria-label': `History of ${asset.name}` }, h('h3', {}, asset.name));
      history.append(section);
      const plotted = isNumeric(asset);
      const points = await fetchHistory(`${base}/asset/${encodeURIComponent(asset.name)}/states`, from, plotted ? PLOT_POINTS : TABLE_ROWS);
      if (points.length === 0) {
        section.append(h('p', { class: 'muted' }, 'No state in this range.'));
      } else if (plotted) {
        plots.set(asset.name, plotHistory(section, asset, points.reverse()));
      } else {
        section.append(table(['At', 'Value'], points.map((p) => h('tr', {}, h('td', {}, formatTime(p.at)), h('td', { class: 'value' }, formatValue(p.value)))), { label: `States of ${asset.name}` }));
        if (points.length === TABLE_ROWS) section.append(h('p', { class: 'muted' }, `The newest ${TABLE_ROWS} states in this range.`));
      }
    }
  };
  rangeSelect.addEventListener('change', loadHistory);
  await loadHistory();

  const uplinks = await get(`${base}/uplinks?limit=20`).catch(() => null);
  if (uplinks && uplinks.data.length > 0) {
    container.append(
      h('h2', {}, 'Raw uplinks'),
      table(
        ['At', 'Source', 'Port', 'Payload (hex)', 'Codec result'],
        uplinks.data.map((u) => h('tr', {}, h('td', {}, formatTime(u.at)), h('td', {}, u.source), h('td', {}, u.port ?? '—'), h('td', { class: 'value' }, u.payload), h('td', { class: u.decoded ? 'ok' : 'error' }, u.decoded ? 'decoded' : `not decoded${u.error ? `: ${u.error}` : ''}`))),
        { label: 'Raw uplinks' },
      ),
    );
  }

  const stop = openEventStream(
    `?device=${encodeURIComponent(device.id)}&kinds=state,radio`,
    (event) => {
      if (event.kind === 'radio') {
        radio.add(event);
        return;
      }
      const cells = latestCells.get(event.asset);
      if (!cells) return;
      cells.value.textContent = formatValue(event.value);
      cells.at.textContent = formatTime(event.at);
      plots.get(event.asset)?.add(event.at, event.value);
    },
    (status, detail) => {
      liveStatus.textContent = status === 'connected' ? 'Live: connected' : status === 'dropped' ? `Live: ${detail} updates skipped (slow connection)` : `Live: reconnecting (${detail ?? ''})`;
    },
  );
  return stop;
}

/**
 * Whether the central manages this device (docs/sync.md, "Manage a fleet from the central"): the
 * revision of its definition and whether its gateway applied it. Null when there is nothing to say.
 */
function managedText(device) {
  const m = device.managed;
  if (!m) return device.gatewayId ? 'no: created at its gateway, its definition flows up from there' : null;
  if (m.appliedRevision === undefined) return `by the central (revision ${m.revision}): change it there`;
  if (m.appliedRevision >= m.revision) return `yes, revision ${m.revision}, applied by its gateway ${formatTime(m.appliedAt)}`;
  return `yes, revision ${m.revision}, not yet applied by its gateway (${m.appliedRevision ? `it has revision ${m.appliedRevision}` : 'none applied yet'})`;
}

/**
 * The device's last uplink (signal, data rate, frequency, the gateway that heard it) and what
 * became of its last commands, from `GET /device/<id>/radio` and then the live radio events. Hidden
 * for a device never heard by radio (an IP device), unless it has LoRaWAN settings.
 */
function radioSection(device, initial) {
  const gatewayName = (id) => (device.link?.type === 'gateway' && device.link.gatewayId === id ? device.link.gatewayName : undefined);
  const lastUplink = h('dd', { dataset: { field: 'last-uplink' } }, 'none yet');
  const outcomeTable = table(['At', 'Outcome', 'Frame counter'], [], { label: 'Command outcomes' });
  const outcomes = outcomeTable.querySelector('tbody');
  const noOutcome = h('p', { class: 'muted' }, 'No downlink yet.');
  const element = h('section', { 'aria-label': 'Radio', hidden: !(initial?.uplink || initial?.downlinks?.length || device.link?.type === 'lorawan') },
    h('h2', {}, 'Radio'),
    h('p', { class: 'muted' }, 'What this daemon has heard since it started: it keeps radio events in memory only.'),
    h('dl', { class: 'kv card' }, h('dt', {}, 'Last uplink'), lastUplink),
    h('h3', {}, 'Command outcomes'),
    noOutcome,
    outcomeTable);
  outcomeTable.hidden = true;
  const showUplink = (e) => lastUplink.replaceChildren(`${formatTime(e.at)}: ${uplinkText(e)}`, ...viaGateway(e, gatewayName));
  const addOutcome = (e, where = 'prepend') => {
    const row = h('tr', { dataset: { status: e.status } }, h('td', {}, formatTime(e.at)), h('td', { class: e.status === 'sent' || e.status === 'acked' ? 'ok' : e.status === 'queued' ? '' : 'warn' }, downlinkText(e), ...viaGateway(e, gatewayName)), h('td', {}, e.fCnt ?? '—'));
    outcomes[where](row);
    while (outcomes.childElementCount > 10) outcomes.lastElementChild.remove();
    noOutcome.hidden = true;
    outcomeTable.hidden = false;
  };
  if (initial?.uplink) showUplink(initial.uplink);
  for (const d of initial?.downlinks ?? []) addOutcome(d, 'append');
  return {
    element,
    add(e) {
      if (e.type === 'uplink') showUplink(e);
      else if (e.type === 'downlink' && e.status) addOutcome(e);
      else return;
      element.hidden = false;
    },
  };
}

/** A plot draws up to 5 000 points: more than a phone screen can show, few enough for a Pi to serve quickly. */
const PLOT_POINTS = 5000;
/** A non-numeric asset's table shows its newest 50 states. */
const TABLE_ROWS = 50;
/** Values fetched for one asset at most, whatever their number: a few large strings must not cost the browser hundreds of MB. */
const HISTORY_BYTES = 2 * 1048576;

const valueBytes = (value) => (typeof value === 'string' ? value.length : (JSON.stringify(value) ?? '').length);

/**
 * The newest `want` states from `from` on, newest first. It asks for no more than it will show and
 * stops following `next` cursors once it has them, or once HISTORY_BYTES of values have come (each
 * page is itself bounded by the gateway's `http.pageBytes`, docs/api.md "Pages").
 */
async function fetchHistory(path, from, want) {
  const points = [];
  let bytes = 0;
  let cursor = null;
  do {
    const limit = Math.min(1000, want - points.length);
    const page = await get(`${path}?from=${encodeURIComponent(from)}&limit=${limit}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
    points.push(...page.data);
    for (const p of page.data) bytes += valueBytes(p.value);
    cursor = page.next;
  } while (cursor && points.length < want && bytes < HISTORY_BYTES);
  return points.slice(0, want);
}

/** The device's ADR state as GET /device/<id>/lorawan shows it (docs/lpwan.md, "ADR"). */
function adrSummary(adr) {
  if (!adr) return '—';
  if (!adr.enabled) return 'off for this device';
  const rate = adr.dataRate ?? 'data rate not known yet';
  return `${rate}, TX power index ${adr.txPower}, ${adr.uplinks}/20 uplinks of history${adr.pending ? ', a LinkADRReq waits for its answer' : ''}`;
}

function loraSummary(s) {
  const last = s.lastUplink;
  return h(
    'dl',
    { class: 'kv card', 'aria-label': 'LoRaWAN settings' },
    h('dt', {}, 'Activation'), h('dd', {}, `${s.activation}${s.joined === false ? ' (not joined yet)' : ''}`),
    h('dt', {}, 'DevEUI'), h('dd', { class: 'mono' }, s.devEui ?? '—'),
    h('dt', {}, 'DevAddr'), h('dd', { class: 'mono' }, s.devAddr ?? '—'),
    h('dt', {}, 'Frame counters'), h('dd', {}, `up ${s.fCntUp}, down ${s.fCntDown}`),
    h('dt', {}, 'Class'), h('dd', {}, s.class ?? 'A'),
    h('dt', {}, 'ADR'), h('dd', {}, adrSummary(s.adr)),
    h('dt', {}, 'Last uplink'), h('dd', {}, last ? `${formatTime(last.at)}: ${last.rssi} dBm, SNR ${last.snr} dB, ${last.dataRate}, ${last.frequency} Hz via ${last.source}` : 'none yet'),
    h('dt', {}, 'Queued commands'), h('dd', {}, String(s.queued ?? 0)),
  );
}

