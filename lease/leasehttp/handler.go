package leasehttp

import (
	"io"
	"log/slog"
	"mime"
	"net/http"

	"github.com/ttlkit/ttlkit/internal/errs"
	"github.com/ttlkit/ttlkit/lease"
)

// maxIDLen bounds the lease ids the handler passes to the store: a Manager's
// are 32 bytes, and no store keeps ids longer than 255.
const maxIDLen = 255

// Handler serves leases of one lease.Manager over HTTP (see ServeHTTP),
// and answers for the resources the leases guard (Held, Error).
type Handler struct {
	m      *lease.Manager
	holder func(*http.Request) (string, error)
	o      Options
	hosts  hosts
	mux    *http.ServeMux
}

// New returns a Handler on m whose leases belong to the holder that holder
// finds in each request: a session id from a signed cookie, a user from an
// authenticated header. A request for which holder returns an error (or "")
// is answered with 401 no_holder and changes nothing. A nil m or holder, or
// a bad option, returns an error matching ErrInvalid.
func New(m *lease.Manager, holder func(r *http.Request) (string, error), opts Options) (*Handler, error) {
	if m == nil {
		return nil, errs.Invalid(ErrInvalid, "leasehttp: Manager is nil")
	}
	if holder == nil {
		return nil, errs.Invalid(ErrInvalid, "leasehttp: holder is nil")
	}
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	hs, ok := newHosts(o.Hosts)
	if !ok {
		return nil, errs.Invalid(ErrInvalid, "leasehttp: Hosts (%q) holds an entry that is not a host name", o.Hosts)
	}
	h := &Handler{m: m, holder: holder, o: o, hosts: hs, mux: http.NewServeMux()}
	h.mux.Handle("POST /{$}", h.guard(h.grant))
	h.mux.Handle("GET /{$}", h.guard(h.status))
	h.mux.Handle("POST /{id}/heartbeat", h.guard(h.heartbeat))
	h.mux.Handle("DELETE /{id}", h.guard(h.release))
	return h, nil
}

// ServeHTTP serves, relative to where the Handler is mounted (use
// http.StripPrefix):
//
//	POST /               grant: {"resource", "cost", "fallback"} → 201 {"lease_id", "resource",
//	                     "cost", "token", "expires_at", "ttl_sec", "grace_sec"}
//	POST /{id}/heartbeat heartbeat → 200 {"ok", "remaining_sec" (to ExpiresAt, whole
//	                     seconds rounded down), "live_sec" (without another heartbeat)}
//	DELETE /{id}         release → 200 {"ok"}
//	GET /                the budget, as Manager.Usage reports it → 200 {"budget", "units",
//	                     "leases", "available"}
//
// A grant's body is one JSON object (Content-Type application/json) with
// no unknown fields; the holder is the request's. Only a lease's holder may
// heartbeat and release it.
//
//	mux.Handle("/leases/", http.StripPrefix("/leases", h))
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }

func (h *Handler) grant(w http.ResponseWriter, r *http.Request) {
	holder, ok := h.holderOf(w, r)
	if !ok {
		return
	}
	if ct := r.Header.Get("Content-Type"); !isJSON(ct) {
		h.Error(w, r, &Problem{Status: http.StatusUnsupportedMediaType, Code: codeUnsupportedMediaType,
			Message: "the body must be application/json"})
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.o.MaxBody))
	if err != nil {
		h.Error(w, r, err)
		return
	}
	req, err := decodeRequest(body)
	if err != nil {
		h.Error(w, r, err)
		return
	}
	req.Holder = holder
	l, err := h.m.Grant(r.Context(), req)
	if err != nil {
		h.Error(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, grantResponse(l))
}

func (h *Handler) heartbeat(w http.ResponseWriter, r *http.Request) {
	holder, ok := h.holderOf(w, r)
	if !ok {
		return
	}
	id := r.PathValue("id")
	if id == "" || len(id) > maxIDLen {
		h.Error(w, r, lease.ErrNotFound)
		return
	}
	res, err := h.m.Heartbeat(r.Context(), id, holder)
	if err != nil {
		h.Error(w, r, err)
		return
	}
	l, live := res.Lease, res.Remaining
	remaining := live
	if live >= l.Grace {
		// The TTL ends after the grace: the store's answer says only
		// that, so measure the rest on our clock.
		remaining = max(live, l.ExpiresAt.Sub(h.o.Clock()))
	}
	writeJSON(w, http.StatusOK, heartbeatBody{OK: true, RemainingSec: seconds(remaining), LiveSec: live.Seconds()})
}

func (h *Handler) release(w http.ResponseWriter, r *http.Request) {
	holder, ok := h.holderOf(w, r)
	if !ok {
		return
	}
	id := r.PathValue("id")
	if id == "" || len(id) > maxIDLen {
		h.Error(w, r, lease.ErrNotFound)
		return
	}
	if _, err := h.m.Release(r.Context(), id, holder); err != nil {
		h.Error(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, okBody{OK: true})
}

func (h *Handler) status(w http.ResponseWriter, r *http.Request) {
	units, n, err := h.m.Usage(r.Context())
	if err != nil {
		h.Error(w, r, err)
		return
	}
	budget := h.m.Stats().Budget
	writeJSON(w, http.StatusOK, statusBody{Budget: budget, Units: units, Leases: n, Available: max(budget-units, 0)})
}

// Held returns the live lease id if the request's holder holds it: the
// check a resource guarded by leases makes before it serves. Otherwise it
// returns an error that Error answers: lease.ErrNotFound or
// lease.ErrExpired, lease.ErrWrongHolder for another holder's lease, a
// *Problem (no_holder) when the request has no holder, or one that refuses
// the request as ServeHTTP does (unknown_host, cross_site).
func (h *Handler) Held(r *http.Request, id string) (lease.Lease, error) {
	if p := h.refusal(r); p != nil {
		return lease.Lease{}, p
	}
	holder, err := h.holder(r)
	if err != nil || holder == "" {
		return lease.Lease{}, noHolder(err)
	}
	if id == "" || len(id) > maxIDLen {
		return lease.Lease{}, lease.ErrNotFound
	}
	l, err := h.m.Get(r.Context(), id)
	if err != nil {
		return lease.Lease{}, err
	}
	if l.Holder != holder {
		return lease.Lease{}, lease.ErrWrongHolder
	}
	return l, nil
}

// Error answers err as ProblemFor(err) and logs it: internal errors
// (status 500) as errors, the rest at debug level.
func (h *Handler) Error(w http.ResponseWriter, r *http.Request, err error) {
	p := ProblemFor(err)
	if p.Status == http.StatusInternalServerError {
		h.o.Logger.ErrorContext(r.Context(), "leasehttp: "+r.Method+" "+r.URL.Path, "err", err)
	} else {
		h.o.Logger.DebugContext(r.Context(), "leasehttp: refused", "method", r.Method, "path", r.URL.Path,
			"code", p.Code, slog.Any("err", err))
	}
	writeJSON(w, p.Status, p)
}

// holderOf returns the request's holder, or answers 401 and returns false.
func (h *Handler) holderOf(w http.ResponseWriter, r *http.Request) (string, bool) {
	holder, err := h.holder(r)
	if err != nil || holder == "" {
		h.Error(w, r, noHolder(err))
		return "", false
	}
	return holder, true
}

func noHolder(err error) error {
	return &Problem{Status: http.StatusUnauthorized, Code: codeNoHolder, Message: "the request names no holder", Err: err}
}

// isJSON reports whether the Content-Type ct is application/json.
func isJSON(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && mt == "application/json"
}
