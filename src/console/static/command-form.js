// A command form per actuator, generated from its profile: a switch for booleans, a number field
// with the profile's bounds, a select for enums, a JSON editor for objects and arrays.
import { api } from './api.js';
import { field, h, message } from './dom.js';

function controlFor(profile) {
  const type = profile?.type;
  if (Array.isArray(profile?.enum)) {
    return { el: h('select', {}, profile.enum.map((v) => h('option', { value: JSON.stringify(v) }, typeof v === 'string' ? v : JSON.stringify(v)))), read: (el) => JSON.parse(el.value) };
  }
  if (type === 'boolean') {
    const el = h('input', { type: 'checkbox', role: 'switch' });
    return { el, read: (e) => e.checked, isSwitch: true };
  }
  if (type === 'number' || type === 'integer') {
    const el = h('input', { type: 'number', step: type === 'integer' ? '1' : 'any', min: profile.minimum, max: profile.maximum, required: true });
    return { el, read: (e) => Number(e.value) };
  }
  if (type === 'string') return { el: h('input', { type: 'text', pattern: profile.pattern }), read: (e) => e.value };
  const el = h('textarea', { spellcheck: 'false' }, type === 'array' ? '[]' : '{}');
  return { el, read: (e) => JSON.parse(e.value) };
}

function describeDelivery(delivered) {
  const parts = [];
  for (const [sink, outcome] of Object.entries(delivered ?? {})) {
    if (sink === 'mqtt') parts.push(`${outcome} MQTT subscriber${outcome === 1 ? '' : 's'} reached`);
    else if (sink === 'lpwan') { if (outcome !== 'none') parts.push(`radio: ${outcome}`); }
    else parts.push(`${sink}: ${outcome}`);
  }
  return parts.join('; ');
}

/**
 * Whether any way down took the command: an MQTT subscriber got it, the radio queued it, a
 * gateway link sent or kept it. A command that reached nobody was recorded, but no device has it.
 */
function reachedSomeone(delivered) {
  return Object.entries(delivered ?? {}).some(([sink, outcome]) => (typeof outcome === 'number' ? outcome > 0 : sink === 'lpwan' ? outcome !== 'none' : Boolean(outcome)));
}

/** The answer of a command as one line: green only when something took it; the codec's warnings follow. */
export function describeAnswer(answer) {
  const at = new Date(answer.at).toLocaleTimeString();
  const warnings = Array.isArray(answer.warnings) && answer.warnings.length > 0 ? ` Warnings: ${answer.warnings.join('; ')}` : '';
  if (!reachedSomeone(answer.delivered)) {
    return { text: `Not delivered (recorded at ${at}): ${describeDelivery(answer.delivered)}; the device is not connected to receive it.${warnings}`, kind: 'warn' };
  }
  return { text: `Sent at ${at}: ${describeDelivery(answer.delivered)}.${warnings}`, kind: warnings ? 'warn' : 'ok' };
}

export function commandForm(device, asset) {
  const { el, read, isSwitch } = controlFor(asset.profile);
  const status = h('p', { class: 'message', role: 'status' });
  const label = `Value for ${asset.name}`;
  const control = isSwitch ? h('div', { class: 'form' }, h('label', { class: 'switch' }, el, label)) : field(label, el);
  const form = h('form', { class: 'card form', 'aria-label': `Command ${asset.name}` }, h('h3', {}, asset.name), control, h('button', { type: 'submit' }, `Send command to ${asset.name}`), status);
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    let value;
    try {
      value = read(el);
    } catch {
      message(status, 'The value is not valid JSON.');
      return;
    }
    try {
      const answer = await api('PUT', `/device/${encodeURIComponent(device.id)}/asset/${encodeURIComponent(asset.name)}/command`, { value });
      const { text, kind } = describeAnswer(answer);
      message(status, text, kind);
    } catch (err) {
      message(status, `${err.code}: ${err.message}`);
    }
  });
  return form;
}
