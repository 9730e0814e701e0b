// The device list and a device's page: assets with their latest values, history plots, raw uplinks,
// command forms for actuators, and live updates.
import { get, openEventStream } from './api.js';
import { ago, field, formatTime, formatValue, h, table } from './dom.js';
import { commandForm } from './command-form.js';
import { loadPlotting, plotHistory } from './plot.js';

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
  if (link.type === 'gateway') return h('span', { class: 'badge', title: `gateway ID ${link.gatewayId}` }, `behind gateway ${link.gatewayName ?? link.gatewayId}`);
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
  container.append(
    h('h1', {}, device.title || device.name),
    h('dl', { class: 'kv card' }, h('dt', {}, 'ID'), h('dd', { class: 'mono' }, device.id), h('dt', {}, 'Name'), h('dd', {}, device.name), h('dt', {}, 'Description'), h('dd', {}, device.description ?? '—'), h('dt', {}, 'Created'), h('dd', {}, formatTime(device.createdOn)), h('dt', {}, 'Link'), h('dd', {}, linkBadge(device.link))),
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
      const points = await fetchHistory(`${base}/asset/${encodeURIComponent(asset.name)}/states`, from);
      if (points.length === 0) {
        section.append(h('p', { class: 'muted' }, 'No state in this range.'));
      } else if (isNumeric(asset)) {
        plots.set(asset.name, plotHistory(section, asset, points));
      } else {
        section.append(table(['At', 'Value'], points.slice(0, 50).map((p) => h('tr', {}, h('td', {}, formatTime(p.at)), h('td', { class: 'value' }, formatValue(p.value)))), { label: `States of ${asset.name}` }));
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
    `?device=${encodeURIComponent(device.id)}&kinds=state`,
    (event) => {
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

async function fetchHistory(path, from) {
  const points = [];
  let cursor = null;
  // Up to 5 000 points: more than a phone screen can show, few enough for a Pi to serve quickly.
  do {
    const page = await get(`${path}?from=${encodeURIComponent(from)}&limit=1000${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
    points.push(...page.data);
    cursor = page.next;
  } while (cursor && points.length < 5000);
  return points.reverse();
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
    { class: 'kv card' },
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

