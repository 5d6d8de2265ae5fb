// The camera page: a grid of snapshots, the suggest stream, and a modal
// whose stream is leased from the server's budget through LeaseClient
// (leasehttp.js): heartbeats while the modal is open, release on close and
// when the tab goes to the background, a dialog when the TTL is reached.
// Its texts are the page's language's, which the server chose (index.html
// carries them); the API answers in the same language.
import { LeaseClient } from '/static/leasehttp.js';

const $ = id => document.getElementById(id);
const T = JSON.parse($('texts').textContent);
const fill = (s, vars) => s.replace(/\{(\w+)\}/g, (m, k) => (k in vars ? vars[k] : m));
const cfg = await (await fetch('/api/config')).json();

// --- the grid -------------------------------------------------------------
const grid = $('grid');
let suggestTile = null;
if (cfg.suggest) {
  suggestTile = document.createElement('div');
  suggestTile.className = 'tile suggest';
  suggestTile.id = 'suggest';
  const img = document.createElement('img');
  img.alt = T.suggest;
  const note = document.createElement('p');
  note.className = 'note';
  note.id = 'suggest-note';
  note.hidden = true;
  const label = document.createElement('span');
  label.innerHTML = 'suggest <small></small>';
  label.querySelector('small').textContent = '· ' + T.suggest;
  suggestTile.append(img, note, label);
  grid.append(suggestTile);
}
const thumbs = [];
for (const cam of cfg.cameras) {
  const b = document.createElement('button');
  b.className = 'tile';
  b.type = 'button';
  b.dataset.camera = cam;
  b.innerHTML = `<img alt="${cam}"><span>${cam}</span>`;
  b.addEventListener('click', () => openModal(cam));
  grid.append(b);
  thumbs.push([cam, b.querySelector('img')]);
}
// Snapshots of the baseline patrol stream: one short request each, so they
// never hold a connection the modal stream needs.
function refreshThumbs() {
  if (document.hidden) return;
  const t = Date.now();
  for (const [cam, img] of thumbs) img.src = `/api/cameras/${cam}/snapshot?t=${t}`;
}
refreshThumbs();
setInterval(refreshThumbs, 2000);

// --- the modal ------------------------------------------------------------
const modal = $('modal');
let current = null;   // the camera shown
let hbCount = 0;
let remainingTimer = null;

const lc = new LeaseClient({
  grantURL: '/api/modal/lease',
  heartbeatURL: id => `/api/modal/lease/${encodeURIComponent(id)}/heartbeat`,
  releaseURL: id => `/api/modal/lease/${encodeURIComponent(id)}`,
  interval: cfg.heartbeat_interval_sec * 1000,
  grace: cfg.heartbeat_grace_sec * 1000,
  onHeartbeat: body => {
    $('hb-count').textContent = String(++hbCount);
    modal.dataset.heartbeats = String(hbCount);
    setRemaining(body.remaining_sec);
  },
  onExpired: () => showDialog('ttl', T.ttl_title, T.ttl_message),
  onLost: why => showDialog('lost', T.lost_title, fill(T.lost_message, { code: why.code })),
  onReleased: why => {
    if (why.code === 'hidden') showDialog('hidden', T.hidden_title, T.hidden_message);
  },
});

async function openModal(cam) {
  current = cam;
  modal.hidden = false;
  $('modal-title').textContent = cam;
  await connect();
}

async function connect() {
  stopStream();
  hideOverlays();
  hbCount = 0;
  $('hb-count').textContent = '0';
  modal.dataset.heartbeats = '0';
  modal.dataset.state = 'requesting';
  $('modal-quality').textContent = '';
  const quality = $('quality').value;
  const r = await lc.acquire({ camera_id: current, quality });
  if (!r.ok) {
    modal.dataset.state = 'rejected';
    $('lease-id').textContent = '–';
    showMessage(r.body.error_code, r.body.message);
    return;
  }
  const body = r.body;
  modal.dataset.state = 'streaming';
  modal.dataset.leaseId = body.lease_id;
  $('lease-id').textContent = body.lease_id.slice(0, 8) + '…';
  $('modal-quality').textContent = body.allowed_quality === 'main' ? T.main : T.sub;
  $('modal-quality').dataset.quality = body.allowed_quality;
  if (body.allowed_quality !== quality) $('modal-quality').textContent += T.fallback;
  setRemaining((Date.parse(body.expires_at) - Date.now()) / 1000);
  const img = $('modal-stream');
  img.src = body.stream_url;
}

function setRemaining(sec) {
  clearInterval(remainingTimer);
  let end = Date.now() + Math.max(0, sec) * 1000;
  const show = () => {
    const s = Math.max(0, Math.round((end - Date.now()) / 1000));
    $('modal-remaining').textContent = fill(T.remaining, { m: Math.floor(s / 60), ss: String(s % 60).padStart(2, '0') });
  };
  show();
  remainingTimer = setInterval(show, 1000);
}

// stopStream closes the MJPEG connection: a new img element replaces the
// old one, whose request the browser then cancels.
function stopStream() {
  const old = $('modal-stream');
  const img = document.createElement('img');
  img.id = 'modal-stream';
  img.alt = '';
  old.replaceWith(img);
  clearInterval(remainingTimer);
  $('modal-remaining').textContent = '';
}

function hideOverlays() {
  $('modal-message').hidden = true;
  $('ttl-dialog').hidden = true;
}

function showMessage(code, text) {
  const m = $('modal-message');
  m.innerHTML = '';
  const strong = document.createElement('strong');
  strong.textContent = code;
  const p = document.createElement('p');
  p.textContent = text;
  m.append(strong, p);
  m.dataset.code = code;
  m.hidden = false;
}

// showDialog stops the stream and offers to reconnect (a new lease) or to
// close.
function showDialog(kind, title, text) {
  if (modal.hidden) return;
  stopStream();
  modal.dataset.state = kind;
  $('ttl-title').textContent = title;
  $('ttl-message').textContent = text;
  $('ttl-dialog').dataset.kind = kind;
  $('ttl-dialog').hidden = false;
}

async function closeModal() {
  stopStream();
  hideOverlays();
  modal.hidden = true;
  modal.dataset.state = 'closed';
  current = null;
  await lc.release('closed');
}

$('modal-close').addEventListener('click', closeModal);
$('close-dialog').addEventListener('click', closeModal);
$('reconnect').addEventListener('click', connect);
document.addEventListener('keydown', e => { if (e.key === 'Escape' && !modal.hidden) closeModal(); });

// --- the status panel -----------------------------------------------------
const fmt = v => (v == null ? '–' : v.toFixed(1) + '%');
// Each poll also keeps this page's UI user seat (the ui_seat it was given),
// which its suggest stream needs: a page in the background does not poll,
// and gives its seat back.
let seat = '';
async function refreshStatus() {
  if (document.hidden) return;
  try {
    const s = await (await fetch('/api/system/status' + (seat ? '?seat=' + encodeURIComponent(seat) : ''))).json();
    if (document.hidden) { leaveSeat(); return; }
    updateSuggest(s);
    const h = $('health');
    h.textContent = s.healthy ? (s.state === 'warning' ? T.warning : T.normal) : T.overloaded;
    h.className = 'badge ' + (s.healthy ? s.state : 'overloaded');
    $('cpu').textContent = fmt(s.cpu_percent);
    $('memory').textContent = fmt(s.memory_percent);
    $('active-modals').textContent = s.active_modals;
    $('budget-remaining').textContent = `${s.modal_budget_remaining} / ${s.modal_budget}`;
    $('ui-users').textContent = s.max_ui_users ? `${s.active_ui_users} / ${s.max_ui_users}` : String(s.active_ui_users);
    $('current-usage').textContent = `${s.current_usage} / ${s.total_stream_units}`;
    $('budget-bar').style.width = `${100 * s.modal_units_in_use / Math.max(1, s.modal_budget)}%`;
  } catch (e) { /* the next poll tries again */ }
}
async function refreshSpark() {
  try {
    const m = await (await fetch('/api/system/metrics?minutes=30')).json();
    const pts = m.points || [];
    const start = Date.now() - 30 * 60 * 1000;
    const top = Math.max(1, ...pts.map(p => Math.max(p.active_modals, p.rejections)));
    const line = key => pts.map(p => {
      const x = Math.max(0, (Date.parse(p.t) - start) / (30 * 60 * 1000)) * 300;
      return `${x.toFixed(1)},${(58 - 56 * p[key] / top).toFixed(1)}`;
    }).join(' ');
    $('spark-modals').setAttribute('points', line('active_modals'));
    $('spark-rejections').setAttribute('points', line('rejections'));
    $('spark').dataset.points = String(pts.length);
  } catch (e) { /* next time */ }
}

// --- the suggest stream -----------------------------------------------------
// It plays on the page's seat: the first MAX_UI_USERS users get one, the
// others are told why they have none, and get it as soon as a seat is free.
let playing = '';     // the seat the suggest stream plays on
function stopSuggest() {
  if (!suggestTile) return;
  const old = suggestTile.querySelector('img');
  const img = document.createElement('img');
  img.alt = T.suggest;
  old.replaceWith(img);
  playing = '';
}
function updateSuggest(s) {
  if (!suggestTile) return;
  const note = $('suggest-note');
  if (s.ui_seat) {
    seat = s.ui_seat;
    note.hidden = true;
    if (playing !== seat) {
      stopSuggest();
      const img = suggestTile.querySelector('img');
      // A stream that fails or ends is started again at the next poll.
      img.addEventListener('error', () => { if (playing === seat) playing = ''; }, { once: true });
      img.src = '/stream/suggest?seat=' + encodeURIComponent(seat);
      playing = seat;
    }
    suggestTile.dataset.state = 'playing';
    return;
  }
  seat = '';
  stopSuggest();
  const refused = s.ui_seat_refused || {};
  note.textContent = refused.message || '';
  note.hidden = !refused.message;
  suggestTile.dataset.state = refused.error_code === 'UI_USERS_FULL' ? 'full' : 'none';
  suggestTile.dataset.code = refused.error_code || '';
}
// leaveSeat gives the seat back at once (so another user gets it), with a
// request that outlives the page.
function leaveSeat() {
  stopSuggest();
  if (suggestTile) suggestTile.dataset.state = 'left';
  if (!seat) return;
  fetch('/api/ui/seat/' + encodeURIComponent(seat), { method: 'DELETE', keepalive: true }).catch(() => {});
  seat = '';
}
document.addEventListener('visibilitychange', () => (document.hidden ? leaveSeat() : refreshStatus()));
window.addEventListener('pagehide', leaveSeat);

refreshStatus();
refreshSpark();
setInterval(refreshStatus, 5000);
setInterval(refreshSpark, 10000);
