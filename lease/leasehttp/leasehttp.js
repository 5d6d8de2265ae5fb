// leasehttp.js: the browser side of a lease served by ttlkit's leasehttp.
//
//   import { LeaseClient } from '/leasehttp.js';
//   const lc = new LeaseClient({
//     grantURL: '/api/modal/lease',          // POST: grant
//     heartbeatURL: id => `/api/modal/lease/${id}/heartbeat`,  // POST (default: grantURL/id/heartbeat)
//     releaseURL: id => `/api/modal/lease/${id}`,              // DELETE (default: grantURL/id)
//     interval: 30000,       // ms between heartbeats
//     grace: 45000,          // ms without a successful heartbeat before the lease is lost
//     releaseOnHidden: true, // release when the page goes to the background
//     onLost(why) {},        // the lease is gone: why.code is the server's error_code, or 'timeout'
//     onExpired() {},        // its TTL (expires_at) is reached
//     onReleased(why) {},    // released by release(), by the page going hidden ('hidden') or closing
//     onHeartbeat(body) {},  // every successful heartbeat's answer
//   });
//   const r = await lc.acquire({ resource: 'cam', cost: 2 });
//   if (!r.ok) showError(r.body.error_code, r.body.message);
//   ...
//   await lc.release();
//
// acquire resolves to { ok, status, body }. The lease id is read from the
// answer's idField ('lease_id'); its end from expiresField ('expires_at'),
// counted against the answer's Date header so that clocks need not agree,
// and refined by each heartbeat's remainingField ('remaining_sec').
// One LeaseClient holds at most one lease at a time.

export class LeaseClient {
  constructor(opts) {
    if (!opts || !opts.grantURL) throw new Error('LeaseClient: grantURL is required');
    const base = opts.grantURL.replace(/\/$/, '');
    this.opts = Object.assign({
      heartbeatURL: id => `${base}/${encodeURIComponent(id)}/heartbeat`,
      releaseURL: id => `${base}/${encodeURIComponent(id)}`,
      interval: 30000,
      grace: 45000,
      releaseOnHidden: true,
      idField: 'lease_id',
      expiresField: 'expires_at',
      remainingField: 'remaining_sec',
      fetch: (...a) => window.fetch(...a),
    }, opts);
    this.id = null;
    this.body = null;
    this._timers = [];
    this._lastOK = 0;
    this._deadline = Infinity;
    this._onVisibility = () => {
      if (document.hidden && this.id && this.opts.releaseOnHidden) this.release('hidden');
    };
    this._onPageHide = () => { if (this.id) this.release('closed'); };
    document.addEventListener('visibilitychange', this._onVisibility);
    window.addEventListener('pagehide', this._onPageHide);
  }

  // active reports whether the client holds a lease it believes live.
  get active() { return this.id !== null; }

  // acquire asks for a lease with the JSON body req.
  async acquire(req) {
    if (this.id) await this.release('replaced');
    let res;
    try {
      res = await this.opts.fetch(this.opts.grantURL, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        credentials: 'same-origin',
        body: JSON.stringify(req),
      });
    } catch (e) {
      return { ok: false, status: 0, body: { error_code: 'network', message: String(e) } };
    }
    const body = await res.json().catch(() => ({ error_code: 'bad_answer', message: res.statusText }));
    if (!res.ok) return { ok: false, status: res.status, body };
    this.id = body[this.opts.idField];
    this.body = body;
    this._lastOK = performance.now();
    this._deadline = Infinity;
    const exp = Date.parse(body[this.opts.expiresField]);
    const served = Date.parse(res.headers.get('Date'));
    if (!isNaN(exp)) {
      const left = exp - (isNaN(served) ? Date.now() : served);
      this._deadline = performance.now() + left;
      this._armExpiry();
    }
    this._timers.push(setInterval(() => this._beat(), this.opts.interval));
    this._timers.push(setInterval(() => this._checkGrace(), 1000));
    return { ok: true, status: res.status, body };
  }

  // release gives the lease back; why is passed to onReleased.
  async release(why = 'released') {
    const id = this.id;
    if (!id) return;
    this._stop();
    this._call('onReleased', { code: why });
    try {
      // keepalive lets the request outlive a closing page.
      await this.opts.fetch(this.opts.releaseURL(id), { method: 'DELETE', credentials: 'same-origin', keepalive: true });
    } catch (e) { /* the server reclaims it after the grace */ }
  }

  // dispose releases the lease and removes the page listeners.
  async dispose() {
    document.removeEventListener('visibilitychange', this._onVisibility);
    window.removeEventListener('pagehide', this._onPageHide);
    await this.release('disposed');
  }

  async _beat() {
    const id = this.id;
    if (!id) return;
    // A heartbeat cannot outlive the TTL: within its last second, let the
    // expiry timer speak.
    if (performance.now() >= this._deadline - 1000) return;
    let res, body;
    try {
      res = await this.opts.fetch(this.opts.heartbeatURL(id), { method: 'POST', credentials: 'same-origin' });
      body = await res.json().catch(() => ({}));
    } catch (e) {
      return; // a network error: try again at the next beat, until the grace runs out
    }
    if (this.id !== id) return;
    if (!res.ok) {
      if (res.status < 400 || res.status >= 500) return; // the server's trouble: retry until the grace runs out
      // The server refused: the lease is gone. Within the estimate's error
      // (the Date header's second, remaining_sec rounded down) of its TTL,
      // that is the TTL; else it was lost (lapsed, released, not ours).
      if (performance.now() >= this._deadline - 2000) {
        this._stop();
        this._call('onExpired', {});
      } else {
        this._lose({ code: body.error_code || String(res.status), status: res.status, body });
      }
      return;
    }
    this._lastOK = performance.now();
    const rem = Number(body[this.opts.remainingField]);
    if (!isNaN(rem)) {
      // remaining_sec is rounded down; the deadline only moves earlier.
      this._deadline = Math.min(this._deadline, performance.now() + rem * 1000 + 1000);
      this._armExpiry();
    }
    this._call('onHeartbeat', body);
  }

  _checkGrace() {
    if (this.id && performance.now() - this._lastOK > this.opts.grace) this._lose({ code: 'timeout' });
  }

  _armExpiry() {
    if (this._expiryTimer) clearTimeout(this._expiryTimer);
    const wait = Math.max(0, this._deadline - performance.now());
    this._expiryTimer = setTimeout(() => {
      if (!this.id) return;
      this._stop();
      this._call('onExpired', {});
    }, wait);
  }

  _lose(why) {
    this._stop();
    this._call('onLost', why);
  }

  _stop() {
    this.id = null;
    for (const t of this._timers) clearInterval(t);
    this._timers = [];
    if (this._expiryTimer) clearTimeout(this._expiryTimer);
    this._expiryTimer = null;
  }

  _call(name, arg) {
    const f = this.opts[name];
    if (typeof f === 'function') {
      try { f(arg); } catch (e) { console.error(`LeaseClient ${name}:`, e); }
    }
  }
}
