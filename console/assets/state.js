// The state every screen reads.

// app is the state every screen reads: who is signed in, and for the
// admin, the tenant it acts for.
export const app = {
  session: null,
  tenant: '',
  timers: [],
  can(cap) {
    const s = this.session;
    return !!s && (s.kind === 'admin' || (s.capabilities || []).includes(cap));
  },
  isAdmin() { return !!this.session && this.session.kind === 'admin'; },
  // tq is the tenant_id to send: the admin names the tenant it acts for.
  tq() { return this.isAdmin() ? { tenant_id: this.tenant } : {}; },
  // link makes a route of the tenant views, for the admin under /t/{id}.
  link(path) { return '#' + (this.isAdmin() && this.tenant ? `/t/${encodeURIComponent(this.tenant)}` : '') + path; },
  every(ms, fn) { this.timers.push(setInterval(fn, ms)); },
};
