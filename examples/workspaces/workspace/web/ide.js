// The workspace's IDE. Every request and every terminal message is
// activity: the page sends nothing unless the user does something, so a
// tab left open lets the workspace go to standby.
'use strict';

const $ = (id) => document.getElementById(id);
const state = { file: '', dirty: false };

function status(msg) { $('status').textContent = msg; }

async function call(method, path, body) {
  const res = await fetch(path, { method, body, headers: body === undefined ? {} : { 'Content-Type': 'text/plain' } });
  if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${(await res.text()).trim()}`);
  return res;
}

async function listFiles() {
  const files = await (await call('GET', 'api/files')).json();
  const ul = $('files');
  ul.replaceChildren(...files.map((f) => {
    const li = document.createElement('li');
    li.textContent = f.name;
    li.dataset.name = f.name;
    li.title = `${f.size} bytes`;
    li.classList.toggle('open', f.name === state.file);
    li.onclick = () => openFile(f.name);
    return li;
  }));
}

async function openFile(name) {
  const text = await (await call('GET', 'api/files/' + encodeURIComponent(name))).text();
  state.file = name;
  state.dirty = false;
  $('editor').value = text;
  $('editor').disabled = false;
  $('save').disabled = false;
  $('current').textContent = name;
  for (const li of $('files').children) li.classList.toggle('open', li.dataset.name === name);
}

async function save() {
  if (!state.file) return;
  await call('PUT', 'api/files/' + encodeURIComponent(state.file), $('editor').value);
  state.dirty = false;
  $('current').textContent = state.file;
  status(`saved ${state.file}`);
  $('editor').dataset.saved = String(Number($('editor').dataset.saved || 0) + 1);
  await listFiles();
}

$('save').onclick = () => save().catch((e) => status(e.message));
$('editor').addEventListener('input', () => { state.dirty = true; $('current').textContent = state.file + ' •'; });
document.addEventListener('keydown', (e) => {
  if ((e.ctrlKey || e.metaKey) && e.key === 's') { e.preventDefault(); save().catch((err) => status(err.message)); }
});
$('new-file').onsubmit = async (e) => {
  e.preventDefault();
  const name = $('new-name').value.trim();
  if (!name) return;
  try {
    await call('PUT', 'api/files/' + encodeURIComponent(name), '');
    $('new-name').value = '';
    await listFiles();
    await openFile(name);
  } catch (err) { status(err.message); }
};

// The terminal: keys go to the workspace as they are typed, and whatever it
// sends is shown. When the connection ends (the workspace went to standby,
// say) it stays closed until the next key: reconnecting by itself would be
// traffic nobody made, and would keep the workspace running for good.
const term = { ws: null, out: '' };

function termState(s, text) { $('term-state').dataset.state = s; $('term-state').textContent = text; }

function render(data) {
  for (const ch of data) {
    if (ch === '\b') term.out = term.out.slice(0, -1);
    else if (ch !== '\r') term.out += ch;
  }
  if (term.out.includes('\x1b[2J')) term.out = term.out.slice(term.out.lastIndexOf('\x1b[2J') + 4);
  if (term.out.length > 100000) term.out = term.out.slice(-50000);
  $('terminal').textContent = term.out;
  $('terminal').scrollTop = $('terminal').scrollHeight;
}

function connect(first) {
  const url = new URL('terminal', location.href);
  url.protocol = location.protocol === 'https:' ? 'wss:' : 'ws:';
  const ws = new WebSocket(url);
  term.ws = ws;
  termState('connecting', 'connecting…');
  ws.onopen = () => { termState('open', 'connected'); if (first) ws.send(first); };
  ws.onmessage = (e) => render(e.data);
  ws.onclose = () => {
    if (term.ws !== ws) return;
    term.ws = null;
    termState('closed', 'disconnected: type to reconnect');
    render('\r\n[disconnected]\r\n');
  };
}

$('terminal').addEventListener('keydown', (e) => {
  let key = null;
  if (e.ctrlKey && e.key === 'c') key = '\x03';
  else if (e.key === 'Enter') key = '\r';
  else if (e.key === 'Backspace') key = '\x7f';
  else if (e.key.length === 1 && !e.ctrlKey && !e.metaKey) key = e.key;
  if (key === null) return;
  e.preventDefault();
  if (!term.ws) connect(key);
  else if (term.ws.readyState === WebSocket.OPEN) term.ws.send(key);
});
$('terminal').addEventListener('paste', (e) => {
  e.preventDefault();
  const text = e.clipboardData.getData('text');
  if (term.ws && term.ws.readyState === WebSocket.OPEN) term.ws.send(text);
});

(async () => {
  try {
    const info = await (await call('GET', 'api/info')).json();
    document.title = `${info.id} — workspace`;
    $('title').textContent = info.id;
    await listFiles();
    connect();
    status('ready');
  } catch (e) { status(e.message); }
})();
