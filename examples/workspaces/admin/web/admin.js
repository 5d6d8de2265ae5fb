// The admin page: the workspaces, read every 2 s from the admin API (which
// is not activity of any workspace), with the time each has left counting
// down in between.
'use strict';

const $ = (id) => document.getElementById(id);
const view = { list: null, offset: 0, after: '', pages: [] };

async function api(method, path, body) {
  const res = await fetch('/admin/api/' + path, {
    method, body: body === undefined ? undefined : JSON.stringify(body),
    headers: body === undefined ? {} : { 'Content-Type': 'application/json' },
  });
  if (res.status === 401) { location.reload(); throw new Error('signed out'); }
  const data = await res.json();
  if (!res.ok) throw new Error(data.error || res.status);
  return data;
}

function ago(ms) {
  const s = Math.round(ms / 1000);
  if (s < 60) return s + ' s';
  if (s < 3600) return Math.floor(s / 60) + ' min ' + (s % 60) + ' s';
  return Math.floor(s / 3600) + ' h ' + Math.floor((s % 3600) / 60) + ' min';
}

function left(ms) {
  if (ms <= 0) return 'due';
  const s = Math.ceil(ms / 1000);
  return Math.floor(s / 60) + ':' + String(s % 60).padStart(2, '0');
}

function render() {
  const list = view.list;
  if (!list) return;
  const now = Date.now() + view.offset;
  $('ttls').textContent = `standby after ${list.standby_seconds} s idle, archive ${list.archive_seconds} s later`;
  const rows = list.workspaces.map((w) => {
    const tr = document.createElement('tr');
    tr.dataset.id = w.id;
    tr.dataset.phase = w.phase;
    const until = w.standby_at || w.archive_at;
    const cells = [
      [w.id, 'id'],
      [w.phase, 'phase'],
      [w.desired_state || '', 'desired'],
      [w.operation || '', 'operation'],
      [ago(now - Date.parse(w.last_access_at)) + ' ago', 'last'],
      [until ? left(Date.parse(until) - now) + (w.standby_at ? ' to standby' : ' to archive') : '', 'left'],
    ];
    for (const [text, cls] of cells) {
      const td = document.createElement('td');
      td.className = cls;
      if (cls === 'phase') {
        const span = document.createElement('span');
        span.className = 'phase ' + text;
        span.textContent = text;
        td.append(span);
      } else td.textContent = text;
      tr.append(td);
    }
    const actions = document.createElement('td');
    const open = document.createElement('button');
    open.textContent = 'open';
    open.className = 'open';
    open.onclick = async () => {
      const link = await api('POST', 'workspaces/' + w.id + '/link');
      window.open(link.url, '_blank');
    };
    const del = document.createElement('button');
    del.textContent = 'delete';
    del.onclick = async () => {
      if (!confirm(`Delete ${w.id}? Its server stops and its files are archived.`)) return;
      await api('DELETE', 'workspaces/' + w.id);
      refresh();
    };
    actions.append(open, ' ', del);
    tr.append(actions);
    return tr;
  });
  $('rows').replaceChildren(...rows);
  $('more-row').hidden = !list.next;
}

async function refresh() {
  try {
    const list = await api('GET', 'workspaces' + (view.after ? '?after=' + encodeURIComponent(view.after) : ''));
    view.offset = Date.parse(list.now) - Date.now();
    view.list = list;
    $('updated').textContent = 'updated ' + new Date().toLocaleTimeString();
    render();
  } catch (e) {
    $('updated').textContent = 'cannot read the workspaces: ' + e.message;
  }
}

$('create').onsubmit = async (e) => {
  e.preventDefault();
  try {
    const id = $('new-id').value.trim();
    const made = await api('POST', 'workspaces', id ? { id } : {});
    $('new-id').value = '';
    const a = document.createElement('a');
    a.href = made.url;
    a.target = '_blank';
    a.id = 'created-link';
    a.textContent = `open ${made.workspace.id}`;
    $('created').replaceChildren('created: ', a);
    refresh();
  } catch (err) { $('created').textContent = err.message; }
};
$('more').onclick = () => { view.pages.push(view.after); view.after = view.list.next; refresh(); };

refresh();
setInterval(refresh, 2000);
setInterval(render, 1000);
