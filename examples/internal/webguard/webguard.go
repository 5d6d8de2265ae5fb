// Package webguard keeps the example systems' HTTP servers out of reach of
// the web pages their user has open.
//
// Listening on loopback is no boundary against a browser on the same
// machine: any page may send a "simple" request (a form, an image, a
// no-cors fetch of text/plain) to 127.0.0.1, and a page served under a name
// that its owner later points at 127.0.0.1 (DNS rebinding) even reads the
// answers, since to the browser they come from the page's own origin.
// Handler refuses both before the server's own handler runs:
//
//   - a request whose Host is not one the server answers to: a loopback
//     name (localhost, *.localhost), an IP address, or a name the operator
//     configured. A rebinding page's requests carry the page's own name,
//     which no one configured; an address in Host cannot be rebound, as no
//     DNS answer is involved.
//   - a request a browser marks as sent by another site or origin
//     (Sec-Fetch-Site, else an Origin that is not the Host), whatever its
//     method or content type: reads too, so that no page can probe or
//     embed what the server answers. With Options.Pages, a top-level
//     navigation (a link the user follows to a page) is let through.
//
// Clients that are not browsers send neither header and pass; what they may
// do is the server's own authentication's business.
package webguard

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
)

// Errors passed to Options.Deny.
var (
	// ErrHost is a request for a Host the server does not answer to.
	ErrHost = errors.New("this server does not answer to that host name")
	// ErrCrossSite is a request a browser sent on behalf of another site.
	ErrCrossSite = errors.New("requests from other sites are refused")
)

// Options shape a Handler.
type Options struct {
	// Hosts are the names the server answers to besides loopback names and
	// IP addresses: "example.com" is that name, ".example.com" that name
	// and every name under it, and "*" any name (only for a server behind
	// a proxy that checks Host itself).
	Hosts []string
	// Pages lets a top-level navigation from another site (the user
	// following a link) GET or HEAD a page. Nothing else from another
	// site passes.
	Pages bool
	// AnySite turns the cross-site check off, leaving only the Host
	// check: for a server that decides per route which other origins may
	// use it, or that no browser can reach without a credential it cannot
	// send across sites (a custom header needs a CORS preflight, which
	// such a server never answers).
	AnySite bool
	// Deny answers a refused request; err is ErrHost or ErrCrossSite. Nil
	// answers 403 with err's text.
	Deny func(w http.ResponseWriter, r *http.Request, err error)
}

// ParseHosts splits a comma-separated list of host names, as a flag or an
// environment variable gives them, and checks each.
func ParseHosts(s string) ([]string, error) {
	var hosts []string
	for _, h := range strings.Split(s, ",") {
		h = strings.ToLower(strings.TrimSpace(h))
		if h == "" {
			continue
		}
		if h != "*" && !validName(strings.TrimPrefix(h, ".")) {
			return nil, fmt.Errorf("%q is not a host name (a name, .name for it and its subdomains, or *)", h)
		}
		hosts = append(hosts, h)
	}
	return hosts, nil
}

// validName reports whether s is a DNS name: dot-separated labels of
// letters, digits, '-' and '_'.
func validName(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for _, label := range strings.Split(strings.TrimSuffix(s, "."), ".") {
		if label == "" || len(label) > 63 {
			return false
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}

// Handler returns h behind the checks of the package comment.
func Handler(h http.Handler, o Options) http.Handler {
	exact, suffixes, anyHost := map[string]bool{}, []string(nil), false
	for _, n := range o.Hosts {
		n = strings.ToLower(strings.TrimSuffix(n, "."))
		switch {
		case n == "*":
			anyHost = true
		case strings.HasPrefix(n, "."):
			exact[n[1:]] = true
			suffixes = append(suffixes, n)
		default:
			exact[n] = true
		}
	}
	deny := o.Deny
	if deny == nil {
		deny = func(w http.ResponseWriter, _ *http.Request, err error) {
			http.Error(w, err.Error(), http.StatusForbidden)
		}
	}
	known := func(host string) bool {
		if anyHost || host == "" || Loopback(host) || exact[host] {
			return true
		}
		for _, s := range suffixes {
			if strings.HasSuffix(host, s) {
				return true
			}
		}
		return false
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !known(hostname(r.Host)) {
			deny(w, r, ErrHost)
			return
		}
		if !o.AnySite && CrossSite(r) && !(o.Pages && navigation(r)) {
			deny(w, r, ErrCrossSite)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// Loopback reports whether host (a name or address, without a port) needs
// no configuration to be answered: a loopback name, which browsers resolve
// themselves, or an IP address, which no DNS answer can rebind.
func Loopback(host string) bool {
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	return net.ParseIP(strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")) != nil
}

// hostname returns the lower-case name or address of a Host header, without
// its port or trailing dot.
func hostname(hostport string) string {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	return strings.ToLower(strings.TrimSuffix(host, "."))
}

// CrossSite reports whether a browser sent r on behalf of a page of another
// origin: Sec-Fetch-Site says so, or, from a browser that does not send it,
// an Origin that is not r's Host. A request with neither header did not come
// from a page of another site.
func CrossSite(r *http.Request) bool {
	switch r.Header.Get("Sec-Fetch-Site") {
	case "same-origin", "none":
		return false
	case "":
	default: // cross-site, same-site, or a value no browser sends
		return true
	}
	origin := r.Header.Get("Origin")
	if origin == "" {
		return false
	}
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" { // "null": a sandboxed frame, a file, a redirect across origins
		return true
	}
	return !strings.EqualFold(u.Host, r.Host)
}

// navigation reports whether r is the top-level navigation of a browser tab
// to a page: a GET or HEAD whose destination is the document itself, not a
// frame, an image or a script of another page.
func navigation(r *http.Request) bool {
	return (r.Method == http.MethodGet || r.Method == http.MethodHead) &&
		r.Header.Get("Sec-Fetch-Mode") == "navigate" && r.Header.Get("Sec-Fetch-Dest") == "document"
}
