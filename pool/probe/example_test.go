package probe_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/ttlkit/ttlkit/pool/probe"
)

// A server that needs a moment before it answers: Wait retries the health
// endpoint until it does.
func ExampleWait() {
	ready := time.Now().Add(50 * time.Millisecond)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if time.Now().Before(ready) {
			http.Error(w, "starting", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	}))
	defer srv.Close()

	err := probe.Wait(context.Background(), probe.HTTP(srv.URL+"/healthz"), probe.Options{Timeout: 5 * time.Second})
	fmt.Println("ready:", err == nil, "answered after the start-up delay:", !time.Now().Before(ready))
	// Output: ready: true answered after the start-up delay: true
}
