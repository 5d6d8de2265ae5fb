package browsertest

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// AttackerHost is the site Attack's page is served from: another site than
// any server under test, resolved to 127.0.0.1 by the browser New starts.
const AttackerHost = "evil.test"

// Request is one request a page of another site can make the browser send
// without the user's consent and without a CORS preflight.
type Request struct {
	// Kind is how the page sends it: "fetch" (fetch with mode no-cors
	// and the user's cookies), "form" (a form submitted into a hidden
	// frame) or "img" (an image's GET).
	Kind string
	// Method is the fetch's method (POST when empty); a form always
	// POSTs and an image GETs.
	Method string
	// URL is where the request goes.
	URL string
	// Body is the fetch's body, or for a form the body its encoding
	// produces ("name=value" in text/plain, where the first '=' splits
	// the body into the one field's name and value).
	Body string
	// ContentType is the fetch's Content-Type (text/plain when empty), or
	// the form's enctype: text/plain (the default),
	// application/x-www-form-urlencoded or multipart/form-data.
	ContentType string
}

// Outcome is what the attacking page saw of one Request.
type Outcome struct {
	Kind, URL string
	// Result is "ok" (a fetch resolved with an opaque answer, an image
	// loaded, a form's frame loaded), "error" (the fetch was refused by
	// the network, the image failed), or "timeout".
	Result string
	Detail string
}

// CrossSiteKinds returns the three kinds of request the security rules are
// tested with, all aimed at url with body: a no-cors fetch POST of
// text/plain, a form submit of text/plain, and an image GET of url.
func CrossSiteKinds(url, body string) []Request {
	return []Request{
		{Kind: "fetch", Method: "POST", URL: url, Body: body, ContentType: "text/plain"},
		{Kind: "form", URL: url, Body: body, ContentType: "text/plain"},
		{Kind: "img", URL: url},
	}
}

// attackPage sends the requests in window.requests one after another and
// leaves their outcomes in window.outcomes, then sets window.done.
const attackPage = `<!doctype html><title>a page of another site</title><body><script>
const wait = (p, ms) => Promise.race([p, new Promise(r => setTimeout(() => r({result: "timeout"}), ms))]);
async function send(q) {
  if (q.Kind === "fetch") {
    try {
      await fetch(q.URL, {method: q.Method || "POST", mode: "no-cors", credentials: "include",
        headers: {"Content-Type": q.ContentType || "text/plain"}, body: q.Body});
      return {result: "ok"};
    } catch (e) { return {result: "error", detail: String(e)}; }
  }
  if (q.Kind === "img") {
    return new Promise(r => { const i = new Image(); i.onload = () => r({result: "ok"});
      i.onerror = () => r({result: "error"}); i.src = q.URL; document.body.appendChild(i); });
  }
  if (q.Kind === "form") {
    const name = "f" + Math.random().toString(36).slice(2);
    const frame = document.createElement("iframe"); frame.name = name; document.body.appendChild(frame);
    const form = document.createElement("form");
    form.method = "POST"; form.action = q.URL; form.target = name; form.enctype = q.ContentType || "text/plain";
    const i = q.Body.indexOf("="), input = document.createElement("input");
    input.type = "hidden"; input.name = i < 0 ? q.Body : q.Body.slice(0, i); input.value = i < 0 ? "" : q.Body.slice(i + 1);
    form.appendChild(input); document.body.appendChild(form);
    const loaded = new Promise(r => frame.onload = () => r({result: "ok"}));
    form.submit();
    return loaded;
  }
  return {result: "error", detail: "unknown kind " + q.Kind};
}
(async () => {
  window.outcomes = [];
  for (const q of window.requests) {
    const o = await wait(send(q), 10000);
    window.outcomes.push({Kind: q.Kind, URL: q.URL, Result: o.result, Detail: o.detail || ""});
  }
  window.done = true;
})();
</script>`

// Attack serves a page from http://evil.test:<port> (another site than
// any server under test) in the browser of ctx, has it send each request,
// and returns what the page saw once every one was answered or failed (or
// 10 s passed). The caller then checks that none of them had an effect.
func Attack(t *testing.T, ctx context.Context, reqs ...Request) []Outcome {
	t.Helper()
	js, err := json.Marshal(reqs)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		// The requests are data of the page, not markup.
		page := strings.Replace(attackPage, "<script>", "<script>window.requests = "+string(js)+";\n", 1)
		fmt.Fprint(w, page)
	}), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()

	_, port, _ := net.SplitHostPort(ln.Addr().String())
	if err := chromedp.Do(ctx, chromedp.Navigate("http://"+AttackerHost+":"+port+"/")); err != nil {
		t.Fatalf("opening the attacking page: %v", err)
	}
	if err := poll(ctx, "window.done", time.Duration(len(reqs)+1)*11*time.Second); err != nil {
		t.Fatalf("waiting for the attacking page: %v", err)
	}
	out, err := chromedp.Run(ctx, chromedp.Evaluate[[]Outcome]("window.outcomes"))
	if err != nil {
		t.Fatalf("reading the attacking page's outcomes: %v", err)
	}
	for _, o := range out {
		t.Logf("cross-site %s %s: %s %s", o.Kind, o.URL, o.Result, o.Detail)
	}
	return out
}
