package leasehttp

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"time"

	"github.com/ttlkit/ttlkit/internal/errs"
	"github.com/ttlkit/ttlkit/lease"
)

// maxIDLen bounds the lease ids the handler passes to the store: NewID's
// are 32 bytes, and no store keeps ids longer than 255.
const maxIDLen = 255

// Handler serves leases of one lease.Manager over HTTP. Its methods Grant,
// Heartbeat, Release and Status return the handler of each operation, to
// mount on paths of the server's choosing; ServeHTTP routes them itself
// (see ServeHTTP).
type Handler struct {
	m      *lease.Manager
	holder HolderFunc
	o      Options
	hosts  hosts
	mux    *http.ServeMux
}

// New returns a Handler on m whose leases belong to the holder that holder
// finds in each request. A nil m or holder, or a bad option, returns an
// error matching ErrInvalid.
func New(m *lease.Manager, holder HolderFunc, opts Options) (*Handler, error) {
	if m == nil {
		return nil, errs.Invalid(ErrInvalid, "leasehttp: Manager is nil")
	}
	if holder == nil {
		return nil, errs.Invalid(ErrInvalid, "leasehttp: HolderFunc is nil")
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
	h.mux.Handle("POST /{$}", h.Grant())
	h.mux.Handle("GET /{$}", h.Status())
	h.mux.Handle("POST /{id}/heartbeat", h.Heartbeat())
	h.mux.Handle("DELETE /{id}", h.Release())
	return h, nil
}

// ServeHTTP routes, relative to where the Handler is mounted (use
// http.StripPrefix): POST / grants, GET / reports the budget, POST
// /{id}/heartbeat heartbeats and DELETE /{id} releases.
//
//	mux.Handle("/leases/", http.StripPrefix("/leases", h))
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }

// Grant returns the handler of a grant: the body (Options.Decode) names the
// resource and costs, the holder is the request's. It answers 201 with
// Options.Granted's body.
func (h *Handler) Grant() http.Handler {
	return h.guard(func(w http.ResponseWriter, r *http.Request) {
		holder, ok := h.holderOf(w, r)
		if !ok {
			return
		}
		if ct := r.Header.Get("Content-Type"); !isJSON(ct) {
			h.Error(w, r, &Problem{Status: http.StatusUnsupportedMediaType, Code: CodeUnsupportedMediaType,
				Message: "the body must be application/json"})
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.o.MaxBody))
		if err != nil {
			h.Error(w, r, err)
			return
		}
		req, err := h.o.Decode(r, body)
		if err != nil {
			var p *Problem
			if !errors.As(err, &p) {
				err = &Problem{Status: http.StatusBadRequest, Code: CodeInvalidArgument, Message: err.Error(), Err: err}
			}
			h.Error(w, r, err)
			return
		}
		req.Holder = holder
		l, err := h.m.Grant(r.Context(), req)
		if err != nil {
			h.Error(w, r, err)
			return
		}
		writeJSON(w, http.StatusCreated, h.o.Granted(r, l))
	})
}

// Heartbeat returns the handler of a heartbeat on the lease Options.LeaseID
// names. Only the lease's holder may heartbeat it. It answers 200 with
// Options.Heartbeated's body.
func (h *Handler) Heartbeat() http.Handler {
	return h.guard(func(w http.ResponseWriter, r *http.Request) {
		holder, ok := h.holderOf(w, r)
		if !ok {
			return
		}
		l, live, err := h.heartbeat(r.Context(), holder, h.o.LeaseID(r))
		if err != nil {
			h.Error(w, r, err)
			return
		}
		remaining := live
		if live >= l.Grace {
			// The TTL ends after the grace: the store's answer says
			// only that, so measure the rest on our clock.
			remaining = max(live, l.ExpiresAt.Sub(h.o.Clock()))
		}
		writeJSON(w, http.StatusOK, h.o.Heartbeated(r, Heartbeat{Lease: l, Live: live, Remaining: remaining}))
	})
}

// Release returns the handler of a release of the lease Options.LeaseID
// names. Only the lease's holder may release it. It answers 200 {"ok":true}.
func (h *Handler) Release() http.Handler {
	return h.guard(func(w http.ResponseWriter, r *http.Request) {
		holder, ok := h.holderOf(w, r)
		if !ok {
			return
		}
		if err := h.release(r.Context(), holder, h.o.LeaseID(r)); err != nil {
			h.Error(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, okBody{OK: true})
	})
}

// Status returns the handler of a status request: the budget as
// Manager.Usage reports it, in Options.Status's body. It needs no holder.
func (h *Handler) Status() http.Handler {
	return h.guard(func(w http.ResponseWriter, r *http.Request) {
		u, err := h.m.Usage(r.Context())
		if err != nil {
			h.Error(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, h.o.Status(r, u))
	})
}

// Held returns the live lease id if the request's holder holds it: the
// check a resource guarded by leases makes before it serves. Otherwise it
// returns an error that Error answers: lease.ErrNotFound or
// lease.ErrExpired, ErrNotHolder for another holder's lease, a *Problem
// (no_holder) when the request has no holder.
func (h *Handler) Held(r *http.Request, id string) (lease.Lease, error) {
	if p := h.refusal(r); p != nil {
		return lease.Lease{}, p
	}
	holder, err := h.holder(r)
	if err != nil || holder == "" {
		return lease.Lease{}, noHolder(err)
	}
	return h.owned(r.Context(), holder, id)
}

// Error answers err as its Problem (see the package doc), after
// Options.Problem, and logs internal errors.
func (h *Handler) Error(w http.ResponseWriter, r *http.Request, err error) {
	p := *problemFor(err)
	if p.Status >= 500 && p.Code == CodeInternal {
		h.o.Logger.ErrorContext(r.Context(), "leasehttp: "+r.Method+" "+r.URL.Path, "err", err)
	} else {
		h.o.Logger.DebugContext(r.Context(), "leasehttp: refused", "method", r.Method, "path", r.URL.Path,
			"code", p.Code, slog.Any("err", err))
	}
	if h.o.Problem != nil {
		h.o.Problem(r, &p)
	}
	writeJSON(w, p.Status, &p)
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
	return &Problem{Status: http.StatusUnauthorized, Code: CodeNoHolder, Message: "the request names no holder", Err: err}
}

// owned returns lease id if it is live and held by holder: the read
// behind Held. Heartbeat and Release check the holder inside the store, in
// the same atomic step as the change (Manager.HeartbeatAs, ReleaseAs).
func (h *Handler) owned(ctx context.Context, holder, id string) (lease.Lease, error) {
	if id == "" || len(id) > maxIDLen {
		return lease.Lease{}, lease.ErrNotFound
	}
	l, err := h.m.Get(ctx, id)
	if err != nil {
		return lease.Lease{}, err
	}
	if l.Holder != holder {
		return lease.Lease{}, ErrNotHolder
	}
	return l, nil
}

// heartbeat heartbeats lease id of holder; it returns the lease and how
// long it now stays live.
func (h *Handler) heartbeat(ctx context.Context, holder, id string) (lease.Lease, time.Duration, error) {
	if id == "" || len(id) > maxIDLen {
		return lease.Lease{}, 0, lease.ErrNotFound
	}
	res, err := h.m.HeartbeatAs(ctx, id, holder)
	if err != nil {
		return lease.Lease{}, 0, err
	}
	return res.Lease, res.Remaining, nil
}

// release releases lease id of holder.
func (h *Handler) release(ctx context.Context, holder, id string) error {
	if id == "" || len(id) > maxIDLen {
		return lease.ErrNotFound
	}
	_, err := h.m.ReleaseAs(ctx, id, holder)
	return err
}

// isJSON reports whether the Content-Type ct is application/json.
func isJSON(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && mt == "application/json"
}
