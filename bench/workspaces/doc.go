// Package workspaces benchmarks examples/workspaces, the cloud-IDE
// workspace system: what its proxy costs per HTTP request and per
// WebSocket message against a plain httputil.ReverseProxy and a plain
// frame relay (the floor: the same relay without authentication or
// activity), and what its TTL runner's tick costs with 100,000 workspaces
// in PostgreSQL against the tick the design writes by hand. The benchmarks
// are in proxy_test.go and tick_test.go.
package workspaces
