// Admin work (admin scope): devices, assets with a profile editor, codecs, application tokens.
import { api, get } from './api.js';
import { copyButton, field, formatTime, h, message, table } from './dom.js';

const PROFILE_TEMPLATES = {
  number: { type: 'number', unit: '°C', minimum: -40, maximum: 85 },
  integer: { type: 'integer', minimum: 0 },
  boolean: { type: 'boolean' },
  string: { type: 'string' },
  enum: { type: 'string', enum: ['off', 'low', 'high'] },
  object: { type: 'object', properties: { lat: { type: 'number' }, lng: { type: 'number' } }, required: ['lat', 'lng'] },
};

const CODEC_TEMPLATES = {
  abcl: '{\n  "sense": [\n    { "asset": "temperature", "value": { "byte": 0, "bytelength": 2, "type": "int", "calculation": "val / 100" } }\n  ]\n}',
  js: 'function decodeUplink(input) {\n  return { data: { temperature: ((input.bytes[0] << 8) | input.bytes[1]) / 100 } };\n}\n',
  cbor: '',
  json: '',
  auto: '',
};

const errorText = (err) => (err.body?.errors ? `${err.message}\n${err.body.errors.join('\n')}` : `${err.code}: ${err.message}`);

function deviceSelect(devices) {
  return h('select', { required: true }, devices.map((d) => h('option', { value: d.id }, `${d.name} (${d.id})`)));
}

function registerDevice(refresh) {
  const name = h('input', { type: 'text', required: true, maxlength: 64 });
  const status = h('div', { role: 'status' });
  const form = h('form', { class: 'card form', 'aria-label': 'Register a device' }, h('h2', {}, 'Register a device'), field('Device name', name), h('button', { type: 'submit' }, 'Register device'), status);
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    try {
      const created = await api('POST', '/devices', { name: name.value });
      status.replaceChildren(
        h('p', { class: 'ok' }, `Device ${created.name} registered with ID `, h('code', { 'data-field': 'device-id' }, created.id), '. Its token is shown once: copy it now.'),
        h('div', { class: 'secret' }, h('code', { 'data-field': 'device-token' }, created.token), copyButton(created.token)),
      );
      form.reset();
      refresh();
    } catch (err) {
      status.replaceChildren(h('p', { class: 'error' }, errorText(err)));
    }
  });
  return form;
}

function createAsset(devices) {
  const device = deviceSelect(devices);
  const name = h('input', { type: 'text', required: true, maxlength: 64 });
  const is = h('select', {}, ['sensor', 'actuator', 'virtual', 'config'].map((k) => h('option', { value: k }, k)));
  const template = h('select', {}, Object.keys(PROFILE_TEMPLATES).map((k) => h('option', { value: k }, k)));
  const profile = h('textarea', { spellcheck: 'false' }, JSON.stringify(PROFILE_TEMPLATES.number, null, 2));
  template.addEventListener('change', () => (profile.value = JSON.stringify(PROFILE_TEMPLATES[template.value], null, 2)));
  const status = h('p', { class: 'message', role: 'status' });
  const form = h('form', { class: 'card form', 'aria-label': 'Create an asset' }, h('h2', {}, 'Create an asset'), field('Device', device), field('Asset name', name), field('Kind', is), field('Profile template', template), field('Profile (JSON Schema)', profile), h('button', { type: 'submit' }, 'Create asset'), status);
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    let parsed;
    try {
      parsed = JSON.parse(profile.value);
    } catch (err) {
      message(status, `The profile is not valid JSON: ${err.message}`);
      return;
    }
    try {
      const asset = await api('POST', `/device/${encodeURIComponent(device.value)}/assets`, { name: name.value, is: is.value, profile: parsed });
      message(status, `Asset ${asset.name} created (${asset.id}).`, 'ok');
    } catch (err) {
      message(status, errorText(err));
    }
  });
  return form;
}

function codecForms(devices) {
  const device = deviceSelect(devices);
  const format = h('select', {}, ['abcl', 'js', 'cbor', 'json', 'auto'].map((f) => h('option', { value: f }, f)));
  const source = h('textarea', { spellcheck: 'false' }, CODEC_TEMPLATES.abcl);
  const file = h('input', { type: 'file', accept: '.json,.jsonc,.js,.txt' });
  format.addEventListener('change', () => (source.value = CODEC_TEMPLATES[format.value]));
  file.addEventListener('change', async () => {
    if (file.files[0]) source.value = await file.files[0].text();
  });
  const settings = () => {
    const uplink = { format: format.value };
    if (format.value === 'abcl') uplink.document = source.value;
    if (format.value === 'js') uplink.script = source.value;
    return { uplink };
  };
  const status = h('pre', { class: 'message', role: 'status' });
  const hex = h('input', { type: 'text', class: 'mono', placeholder: '0A1B…', pattern: '([0-9A-Fa-f]{2})*' });
  const port = h('input', { type: 'number', min: 1, max: 223, placeholder: 'none' });
  const result = h('pre', { class: 'message', role: 'status' });
  const save = h('button', { type: 'submit' }, 'Save codec for device');
  const tryButton = h('button', { type: 'button', class: 'secondary' }, 'Decode hex payload');
  const form = h('form', { class: 'card form', 'aria-label': 'Device codec' },
    h('h2', {}, 'Device codec'),
    field('Device', device), field('Uplink format', format), field('Codec file', file), field('Document or script', source),
    save, status,
    h('h3', {}, 'Try it on a payload'), field('Payload (hex)', hex), field('FPort', port), tryButton, result);
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    try {
      const saved = await api('PUT', `/device/${encodeURIComponent(device.value)}/codec`, settings());
      message(status, `Saved.${saved.warnings?.length ? ` Warnings:\n${saved.warnings.join('\n')}` : ' No warnings.'}`, 'ok');
    } catch (err) {
      message(status, errorText(err));
    }
  });
  tryButton.addEventListener('click', async () => {
    try {
      const body = { ...settings(), payload: hex.value.trim() };
      if (port.value) body.port = Number(port.value);
      const decoded = await api('POST', '/codec/decode', body);
      const ok = decoded.errors.length === 0;
      message(result, JSON.stringify(decoded, null, 2), ok ? 'ok' : 'error');
    } catch (err) {
      message(result, errorText(err));
    }
  });
  return form;
}

function tokens(list, refresh) {
  const name = h('input', { type: 'text', required: true });
  const scopes = ['read', 'command', 'admin'].map((s) => h('input', { type: 'checkbox', value: s, checked: s === 'read' }));
  const status = h('div', { role: 'status' });
  const form = h('form', { class: 'card form', 'aria-label': 'Create an application token' },
    h('h2', {}, 'Application tokens'), field('Token name', name),
    h('fieldset', {}, h('legend', {}, 'Scopes'), ...scopes.map((c) => h('label', { class: 'switch' }, c, c.value))),
    h('button', { type: 'submit' }, 'Create token'), status);
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    try {
      const created = await api('POST', '/tokens', { name: name.value, scopes: scopes.filter((c) => c.checked).map((c) => c.value) });
      status.replaceChildren(h('p', { class: 'ok' }, 'Token created; it is shown once:'), h('div', { class: 'secret' }, h('code', {}, created.token), copyButton(created.token)));
      refresh();
    } catch (err) {
      status.replaceChildren(h('p', { class: 'error' }, errorText(err)));
    }
  });
  const rows = list
    .filter((t) => t.kind === 'app')
    .map((t) => h('tr', {},
      h('td', {}, t.name), h('td', { class: 'mono' }, t.id), h('td', {}, t.scopes.join(', ')), h('td', {}, formatTime(t.createdOn)),
      h('td', {}, t.revokedOn ? `revoked ${formatTime(t.revokedOn)}` : h('button', { type: 'button', class: 'secondary', onclick: async () => {
        if (!confirm(`Revoke token ${t.name}? Clients using it are disconnected.`)) return;
        await api('DELETE', `/tokens/${encodeURIComponent(t.id)}`);
        refresh();
      } }, `Revoke ${t.name}`))));
  return [form, table(['Name', 'ID', 'Scopes', 'Created', ''], rows, { label: 'Application tokens' })];
}

export async function adminPage(container) {
  const render = async () => {
    const [devices, tokenList] = await Promise.all([get('/devices'), get('/tokens')]);
    const keepOpen = container.querySelector('[data-field="device-token"]')?.closest('form');
    container.replaceChildren(h('h1', {}, 'Admin'), keepOpen ?? registerDevice(render), createAsset(devices), codecForms(devices), ...tokens(tokenList, render));
  };
  await render();
}
