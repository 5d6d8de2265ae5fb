package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"mime"
	"net/http"
	"time"

	"github.com/ttlkit/ttlkit/lease"
	"github.com/ttlkit/ttlkit/lease/leasehttp"
)

// API answers the modal lease calls of the design (§8) on the lease
// Manager, and every error of the server in this API's codes and the
// request's language: leasehttp's error mapping (through its Handler, which
// also checks, for the streams, that a request's session holds a lease),
// rewritten by codes and messages.
type API struct {
	*leasehttp.Handler
	leases *lease.Manager
	adm    *Admission
}

// maxIDLen bounds the lease ids the API passes to the store: lease ids are
// 32 bytes, and no store keeps ids longer than 255.
const maxIDLen = 255

// Error answers err with leasehttp's Problem for it, in this API's code
// and the request's language.
func (a API) Error(w http.ResponseWriter, r *http.Request, err error) {
	p := leasehttp.ProblemFor(err)
	if c, ok := codes[p.Code]; ok {
		p.Code, p.Message = c, message(langOf(r), c)
	}
	a.Handler.Error(w, r, p)
}

// holder returns the request's session, or answers 401 and returns false.
func (a API) holder(w http.ResponseWriter, r *http.Request) (string, bool) {
	holder, err := Holder(r)
	if err != nil {
		a.Error(w, r, &leasehttp.Problem{Status: http.StatusUnauthorized, Code: "no_holder",
			Message: "the request names no holder", Err: err})
		return "", false
	}
	return holder, true
}

// Grant serves POST /api/modal/lease: a JSON leaseRequest of at most
// maxBody bytes from the session, answered 201 with a leaseResponse.
func (a API) Grant() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		holder, ok := a.holder(w, r)
		if !ok {
			return
		}
		if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
			a.Error(w, r, &leasehttp.Problem{Status: http.StatusUnsupportedMediaType, Code: "unsupported_media_type",
				Message: "the body must be application/json"})
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
		if err != nil {
			a.Error(w, r, err)
			return
		}
		req, err := a.adm.Decode(r, body)
		if err != nil {
			var p *leasehttp.Problem
			if !errors.As(err, &p) {
				err = &leasehttp.Problem{Status: http.StatusBadRequest, Code: "invalid_argument", Message: err.Error(), Err: err}
			}
			a.Error(w, r, err)
			return
		}
		req.Holder = holder
		l, err := a.leases.Grant(r.Context(), req)
		if err != nil {
			a.Error(w, r, err)
			return
		}
		writeJSON(w, http.StatusCreated, a.adm.Granted(l))
	})
}

// Heartbeat serves POST /api/modal/lease/{lease_id}/heartbeat: only the
// lease's session may heartbeat it.
func (a API) Heartbeat() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		holder, ok := a.holder(w, r)
		if !ok {
			return
		}
		id := r.PathValue("lease_id")
		if id == "" || len(id) > maxIDLen {
			a.Error(w, r, lease.ErrNotFound)
			return
		}
		hb, err := a.leases.Heartbeat(r.Context(), id, holder)
		if err != nil {
			a.Error(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, a.adm.Heartbeated(hb, time.Now()))
	})
}

// Release serves DELETE /api/modal/lease/{lease_id}: only the lease's
// session may release it.
func (a API) Release() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		holder, ok := a.holder(w, r)
		if !ok {
			return
		}
		id := r.PathValue("lease_id")
		if id == "" || len(id) > maxIDLen {
			a.Error(w, r, lease.ErrNotFound)
			return
		}
		if _, err := a.leases.Release(r.Context(), id, holder); err != nil {
			a.Error(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]bool{"ok": true})
	})
}

// Status serves GET /api/system/status (Admission.Status).
func (a API) Status() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		units, n, err := a.leases.Usage(r.Context())
		if err != nil {
			a.Error(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, a.adm.Status(r, units, n))
	})
}

// decodeBody decodes body, one JSON object with no unknown fields and
// nothing after it, into v. Its error is a *leasehttp.Problem with code
// bad_json.
func decodeBody(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil {
		if _, terr := dec.Token(); terr != io.EOF {
			err = errors.New("data after the JSON value")
		}
	}
	if err != nil {
		return &leasehttp.Problem{Status: http.StatusBadRequest, Code: "bad_json", Message: "malformed JSON: " + err.Error(), Err: err}
	}
	return nil
}

// seconds returns d in whole seconds, rounded down, never negative: a
// page that counts down from it never outlives the server's view.
func seconds(d time.Duration) int {
	if d <= 0 {
		return 0
	}
	return int(math.Floor(d.Seconds()))
}
