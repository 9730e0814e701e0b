// Outpost console: sign-in, navigation and a hash router. Pages load on first visit, so the
// sign-in page fetches only this file, api.js, dom.js and the style sheet.
import { ApiError, api, session, whenUnauthorized } from './api.js';
import { h, message } from './dom.js';

const signIn = document.getElementById('sign-in');
const form = document.getElementById('sign-in-form');
const formMessage = document.getElementById('sign-in-message');
const nav = document.getElementById('nav');
const view = document.getElementById('view');
const signOutButton = document.getElementById('sign-out');

/** What the token may do, from GET /whoami; pages read it to hide what the token cannot use. */
export const who = { kind: null, scopes: [] };
export const can = (scope) => who.scopes.includes(scope) || (scope === 'read' && who.scopes.includes('admin'));

const PAGES = [
  { path: 'devices', title: 'Devices', scope: 'read', load: () => import('./devices.js').then((m) => m.devicesPage) },
  { path: 'device', title: null, scope: 'read', load: () => import('./devices.js').then((m) => m.devicePage) },
  { path: 'live', title: 'Live', scope: 'read', load: () => import('./live.js').then((m) => m.livePage) },
  { path: 'gateway', title: 'Gateway', scope: 'read', load: () => import('./gateway.js').then((m) => m.gatewayPage) },
  { path: 'admin', title: 'Admin', scope: 'admin', load: () => import('./admin.js').then((m) => m.adminPage) },
];

let leavePage = () => {};
/**
 * Counts route changes. A page loads over the network; when another route began meanwhile (a quick
 * click on the next link, or the sign-in's own route), the slower one must not replace the page
 * shown after it, nor keep its live stream open.
 */
let routeCount = 0;

function showSignIn(text) {
  routeCount++; // a page still loading is not shown after the sign-out
  leavePage();
  leavePage = () => {};
  session.token = null;
  who.kind = null;
  who.scopes = [];
  nav.hidden = true;
  signOutButton.hidden = true;
  view.replaceChildren();
  signIn.hidden = false;
  if (text) message(formMessage, text);
  document.getElementById('token').focus();
}

async function signInWith(token) {
  const me = await api('GET', '/whoami', undefined, token);
  if (me.kind !== 'app') throw new ApiError(403, 'NOT_APP_TOKEN', 'This is a device token. Sign in with an application token (app:…).');
  session.token = token;
  who.kind = me.kind;
  who.scopes = me.scopes;
  signIn.hidden = true;
  signOutButton.hidden = false;
  renderNav();
  if (!location.hash || location.hash === '#/') location.hash = can('read') ? '#/devices' : can('admin') ? '#/admin' : '#/none';
  else route();
}

function renderNav() {
  nav.hidden = false;
  nav.replaceChildren(...PAGES.filter((p) => p.title && can(p.scope)).map((p) => h('a', { href: `#/${p.path}`, dataset: { page: p.path } }, p.title)));
}

async function route() {
  if (!session.token || !who.kind) return;
  const [, path = '', ...rest] = location.hash.split('/');
  const page = PAGES.find((p) => p.path === path);
  for (const a of nav.querySelectorAll('a')) {
    if (a.dataset.page === (path === 'device' ? 'devices' : path)) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
  leavePage();
  leavePage = () => {};
  const thisRoute = ++routeCount;
  const superseded = () => thisRoute !== routeCount;
  if (!page || !can(page.scope)) {
    view.replaceChildren(h('h1', {}, 'Nothing here'), h('p', {}, page ? 'This token may not open this page.' : 'This token may not read devices; ask for a token with the read scope.'));
    return;
  }
  view.replaceChildren(h('p', { class: 'muted' }, 'Loading…'));
  try {
    const render = await page.load();
    if (superseded()) return;
    const container = h('div');
    const leave = await render(container, rest.map(decodeURIComponent), { can, who });
    if (superseded()) {
      if (typeof leave === 'function') leave();
      return;
    }
    view.replaceChildren(container);
    leavePage = typeof leave === 'function' ? leave : () => {};
    document.getElementById('main').focus({ preventScroll: true });
  } catch (err) {
    if (superseded() || (err instanceof ApiError && err.status === 401)) return;
    view.replaceChildren(h('h1', {}, 'Error'), h('p', { class: 'error', role: 'alert' }, err.message));
  }
}

form.addEventListener('submit', async (event) => {
  event.preventDefault();
  const token = form.token.value.trim();
  message(formMessage, 'Checking…', 'muted');
  try {
    await signInWith(token);
    form.reset();
    message(formMessage, '', 'muted');
  } catch (err) {
    const text = err instanceof ApiError && err.status === 401 ? 'This token is unknown or has been revoked.' : err.message;
    message(formMessage, text);
  }
});

signOutButton.addEventListener('click', () => showSignIn());
whenUnauthorized(() => showSignIn('Your token was revoked or is no longer valid. Sign in with another token.'));
window.addEventListener('hashchange', route);

if (session.token) {
  signInWith(session.token).catch(() => showSignIn('Your token was revoked or is no longer valid. Sign in with another token.'));
}
