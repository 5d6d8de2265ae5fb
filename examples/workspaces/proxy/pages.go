package proxy

import (
	"errors"
	"html/template"
	"net/http"
	"strings"

	"github.com/ttlkit/ttlkit/examples/internal/webguard"
)

var pageTmpl = template.Must(template.New("page").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}}</title>
<style>body{font:16px system-ui,sans-serif;max-width:36em;margin:12vh auto;padding:0 1em;color:#1d2330}h1{font-size:1.4em}p{line-height:1.5}.code{color:#6b7385}</style>
</head><body><h1>{{.Title}}</h1><p>{{.Message}}</p><p class="code">HTTP {{.Status}}</p></body></html>
`))

// page answers with status and a short explanation: an HTML page for a
// browser, plain text for anything else. It is never cached.
func page(w http.ResponseWriter, r *http.Request, status int, title, msg string) {
	h := w.Header()
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	if strings.Contains(r.Header.Get("Accept"), "text/html") {
		h.Set("Content-Type", "text/html; charset=utf-8")
		w.WriteHeader(status)
		_ = pageTmpl.Execute(w, struct {
			Title, Message string
			Status         int
		}{title, msg, status})
		return
	}
	h.Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(title + ": " + msg + "\n"))
}

// Refuse answers, with the system's page, a request webguard keeps out
// (it is a webguard.Options.Deny): one for a Host the server does not
// answer to (a page under a DNS-rebinding name, or a name missing from
// ALLOWED_HOSTS), or one a page of another site made the browser send.
func Refuse(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, webguard.ErrHost) {
		page(w, r, http.StatusForbidden, "Unknown address",
			"This server does not answer to this name. Open it at its own address, or ask its operator to add the name to ALLOWED_HOSTS.")
		return
	}
	page(w, r, http.StatusForbidden, "Refused", "Requests from other sites cannot use this server.")
}
