package leasehttp

import (
	"net"
	"net/http"
	"net/url"
	"strings"
)

// hosts is the set of Host names a Handler answers to besides loopback
// names and IP addresses (see Options.Hosts).
type hosts struct {
	exact    map[string]bool
	suffixes []string
	any      bool
}

func newHosts(names []string) (hosts, bool) {
	hs := hosts{exact: map[string]bool{}}
	for _, n := range names {
		n = strings.ToLower(strings.TrimSuffix(n, "."))
		switch {
		case n == "*":
			hs.any = true
		case n == "" || n == "." || strings.ContainsAny(n, ":/ *"):
			return hs, false
		case strings.HasPrefix(n, "."):
			hs.exact[n[1:]] = true
			hs.suffixes = append(hs.suffixes, n)
		default:
			hs.exact[n] = true
		}
	}
	return hs, true
}

// allows reports whether a request with this Host header may be answered.
func (hs hosts) allows(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	if hs.any || host == "" || host == "localhost" || strings.HasSuffix(host, ".localhost") || hs.exact[host] ||
		net.ParseIP(strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")) != nil {
		return true
	}
	for _, s := range hs.suffixes {
		if strings.HasSuffix(host, s) {
			return true
		}
	}
	return false
}

// crossSite reports whether a browser sent r for a page of another origin:
// Sec-Fetch-Site says so, or, from a browser without it, an Origin that is
// not r's Host.
func crossSite(r *http.Request) bool {
	switch r.Header.Get("Sec-Fetch-Site") {
	case "same-origin", "none":
		return false
	case "":
	default:
		return true
	}
	origin := r.Header.Get("Origin")
	if origin == "" {
		return false
	}
	u, err := url.Parse(origin)
	return err != nil || u.Host == "" || !strings.EqualFold(u.Host, r.Host)
}

// refusal returns the Problem that keeps r out, or nil: a Host the handler
// does not answer to (a DNS-rebinding name), or a request another site's
// page made the browser send, whatever its method and content type.
func (h *Handler) refusal(r *http.Request) *Problem {
	if !h.hosts.allows(r.Host) {
		return &Problem{Status: http.StatusForbidden, Code: codeUnknownHost,
			Message: "this server does not answer to the host name " + r.Host}
	}
	if crossSite(r) {
		return &Problem{Status: http.StatusForbidden, Code: codeCrossSite,
			Message: "requests from other sites are refused"}
	}
	return nil
}

// guard answers the refusal of a request that must not reach next.
func (h *Handler) guard(next func(http.ResponseWriter, *http.Request)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p := h.refusal(r); p != nil {
			h.Error(w, r, p)
			return
		}
		next(w, r)
	})
}
