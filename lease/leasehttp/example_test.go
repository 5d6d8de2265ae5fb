package leasehttp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/ttlkit/ttlkit/lease"
	"github.com/ttlkit/ttlkit/lease/leasehttp"
)

// Leases for browsers under /leases/, held by the caller named in a header
// (a real server takes it from a signed session cookie).
func Example() {
	m, _ := lease.New(35, lease.Options{})
	defer func() { _ = m.Close(context.Background()) }()
	h, _ := leasehttp.New(m, func(r *http.Request) (string, error) { return r.Header.Get("X-User"), nil }, leasehttp.Options{})
	mux := http.NewServeMux()
	mux.Handle("/leases/", http.StripPrefix("/leases", h))
	mux.Handle("GET /leasehttp.js", leasehttp.ClientScript())
	srv := httptest.NewServer(mux)
	defer srv.Close()

	post := func(user, reqBody string) string {
		req, _ := http.NewRequest("POST", srv.URL+"/leases/", strings.NewReader(reqBody))
		req.Header.Set("X-User", user)
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			return err.Error()
		}
		defer res.Body.Close()
		var body struct {
			LeaseID   string `json:"lease_id"`
			Cost      int    `json:"cost"`
			ErrorCode string `json:"error_code"`
		}
		_ = json.NewDecoder(res.Body).Decode(&body)
		return fmt.Sprintf("%d %q id:%d cost:%d", res.StatusCode, body.ErrorCode, len(body.LeaseID), body.Cost)
	}
	fmt.Println(post("alice", `{"resource":"cam_2f_19","cost":2,"fallback":[1]}`))
	fmt.Println(post("alice", `{"resource":"cam_1f_02","cost":1}`))
	// Output:
	// 201 "" id:32 cost:2
	// 409 "holder_has_lease" id:0 cost:0
}
