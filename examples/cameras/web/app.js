// The camera page: a grid of snapshots, the suggest stream, and a modal
// whose stream is leased from the server's budget through LeaseClient
// (leasehttp.js): heartbeats while the modal is open, release on close and
// when the tab goes to the background, a dialog when the TTL is reached.
import { LeaseClient } from '/static/leasehttp.js';

const $ = id => document.getElementById(id);
const cfg = await (await fetch('/api/config')).json();

// --- the grid -------------------------------------------------------------
const grid = $('grid');
if (cfg.suggest) {
  const t = document.createElement('div');
  t.className = 'tile suggest';
  t.innerHTML = '<img alt="サジェスト"><span>suggest</span>';
  t.querySelector('img').src = '/stream/suggest';
  grid.append(t);
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
  onExpired: () => showDialog('ttl', '表示時間が終了しました', '続けて表示しますか？'),
  onLost: why => showDialog('lost', '接続が切れました', `Leaseが失われました (${why.code})。再接続しますか？`),
  onReleased: why => {
    if (why.code === 'hidden') showDialog('hidden', '表示を停止しました', 'タブがバックグラウンドに移ったため、ストリームを解放しました。');
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
  $('modal-quality').textContent = body.allowed_quality === 'main' ? 'メイン' : 'サブ';
  $('modal-quality').dataset.quality = body.allowed_quality;
  if (body.allowed_quality !== quality) $('modal-quality').textContent += '（予算不足のためサブに切替）';
  setRemaining((Date.parse(body.expires_at) - Date.now()) / 1000);
  const img = $('modal-stream');
  img.src = body.stream_url;
}

function setRemaining(sec) {
  clearInterval(remainingTimer);
  let end = Date.now() + Math.max(0, sec) * 1000;
  const show = () => {
    const s = Math.max(0, Math.round((end - Date.now()) / 1000));
    $('modal-remaining').textContent = `残り ${Math.floor(s / 60)}:${String(s % 60).padStart(2, '0')}`;
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

// showDialog stops the stream and offers 再接続 (a new lease) or 閉じる.
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
async function refreshStatus() {
  try {
    const s = await (await fetch('/api/system/status')).json();
    const h = $('health');
    h.textContent = s.healthy ? (s.state === 'warning' ? '注意' : '正常') : '高負荷';
    h.className = 'badge ' + (s.healthy ? s.state : 'overloaded');
    $('cpu').textContent = fmt(s.cpu_percent);
    $('memory').textContent = fmt(s.memory_percent);
    $('active-modals').textContent = s.active_modals;
    $('budget-remaining').textContent = `${s.modal_budget_remaining} / ${s.modal_budget}`;
    $('ui-users').textContent = s.active_ui_users;
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
refreshStatus();
refreshSpark();
setInterval(refreshStatus, 5000);
setInterval(refreshSpark, 10000);
