// Live traffic: states, commands, errors and radio events as the gateway commits and sends them.
import { get, openEventStream } from './api.js';
import { field, formatValue, h } from './dom.js';
import { downlinkText, uplinkText, viaGateway } from './radio.js';

const KINDS = [
  ['state', 'States'],
  ['command', 'Commands'],
  ['error', 'Errors'],
  ['radio', 'Radio'],
];
const MAX_ROWS = 500;

function describe(e) {
  switch (e.kind) {
    case 'state':
      return `${e.asset} = ${formatValue(e.value)} (via ${e.source})`;
    case 'command':
      return `command ${formatValue(e.values)}${e.meta ? ` meta ${formatValue(e.meta)}` : ''}`;
    case 'error':
      return `${e.code}: ${e.error} (${e.topic})`;
    default: {
      if (e.type === 'uplink') return `uplink: ${uplinkText(e)}`;
      if (e.type === 'downlink') return `downlink ${downlinkText(e)}`;
      const { kind, deviceId, at, type, gateway, ...rest } = e;
      return `${type}: ${formatValue(rest)}`;
    }
  }
}

/**
 * Gateway names for the events a central's gateways forward: listed once, on the first such event,
 * when the token may list gateways (admin); the links already on screen then show the name.
 */
function gatewayNames(can, list) {
  const names = new Map();
  let asked = false;
  return (id) => {
    if (!asked && can('admin')) {
      asked = true;
      get('/gateways')
        .then((gateways) => {
          for (const g of gateways) names.set(g.id, g.name);
          for (const a of list.querySelectorAll('a[data-gateway]')) if (names.has(a.dataset.gateway)) a.textContent = names.get(a.dataset.gateway);
        })
        .catch(() => {});
    }
    return names.get(id);
  };
}

export function livePage(container, params, { can }) {
  const deviceFilter = h('input', { type: 'search', placeholder: 'all devices' });
  const checks = KINDS.map(([kind, label]) => h('input', { type: 'checkbox', checked: true, value: kind }));
  const pause = h('button', { type: 'button', class: 'secondary', 'aria-pressed': 'false' }, 'Pause');
  const status = h('p', { class: 'muted', role: 'status' }, 'Connecting…');
  const list = h('ul', { class: 'live-list', 'aria-label': 'Live events', 'aria-live': 'off' });
  const nameOf = gatewayNames(can, list);
  let paused = false;
  let held = 0;
  pause.addEventListener('click', () => {
    paused = !paused;
    pause.textContent = paused ? 'Resume' : 'Pause';
    pause.setAttribute('aria-pressed', String(paused));
    if (!paused) held = 0;
    status.textContent = paused ? 'Paused' : 'Live';
  });
  const visible = (e) => {
    const q = deviceFilter.value.trim();
    return checks.some((c) => c.checked && c.value === e.kind) && (!q || e.deviceId.includes(q));
  };
  const stop = openEventStream(
    '',
    (e) => {
      if (!visible(e)) return;
      if (paused) {
        status.textContent = `Paused (${++held} new events not shown)`;
        return;
      }
      const row = h('li', { class: `k-${e.kind}`, dataset: { kind: e.kind, device: e.deviceId } }, `${new Date(e.at).toLocaleTimeString()} ${e.kind} `, h('a', { href: `#/device/${encodeURIComponent(e.deviceId)}` }, e.deviceId), ` ${describe(e)}`, ...(e.kind === 'radio' ? viaGateway(e, nameOf) : []));
      list.prepend(row);
      while (list.childElementCount > MAX_ROWS) list.lastElementChild.remove();
    },
    (s, detail) => {
      if (!paused) status.textContent = s === 'connected' ? 'Live' : s === 'dropped' ? `${detail} events skipped (slow connection)` : `Reconnecting (${detail ?? ''})`;
    },
  );
  container.append(
    h('h1', {}, 'Live'),
    h('div', { class: 'row card' },
      h('div', { class: 'grow' }, field('Device ID contains', deviceFilter)),
      h('fieldset', {}, h('legend', {}, 'Show'), ...KINDS.map(([, label], i) => h('label', { class: 'switch' }, checks[i], label))),
      pause),
    status,
    list,
  );
  return stop;
}
