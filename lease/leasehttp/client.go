package leasehttp

import (
	"bytes"
	_ "embed"
	"net/http"
	"time"
)

// clientJS is leasehttp.js, the browser client (see the package doc).
//
//go:embed leasehttp.js
var clientJS []byte

// loaded is the modification time ClientScript reports, so that browsers
// revalidate the script when the program restarts.
var loaded = time.Now()

// ClientScript returns a handler that serves leasehttp.js, the browser
// client, as a JavaScript module, on whatever path it is mounted.
//
//	mux.Handle("GET /leasehttp.js", leasehttp.ClientScript())
func ClientScript() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
		w.Header().Set("Cache-Control", "no-cache")
		http.ServeContent(w, r, "leasehttp.js", loaded, bytes.NewReader(clientJS))
	})
}
