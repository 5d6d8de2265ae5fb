// Package leasehttp hands leases to browsers over HTTP: an http.Handler for
// grant, heartbeat, release and status on a lease.Manager, and a small
// JavaScript client that heartbeats the lease while a page uses it.
//
//	m, _ := lease.New(35, lease.Options{})
//	h, _ := leasehttp.New(m, sessionOf, leasehttp.Options{})
//	mux.Handle("/leases/", http.StripPrefix("/leases", h))
//	mux.Handle("GET /leasehttp.js", leasehttp.ClientScript())
//
// The holder of every lease is whoever the request says it is, through a
// function the server gives New (typically the session behind a cookie).
// A lease's heartbeat and release belong to its holder: another holder gets
// 403 not_holder and changes nothing. Handler.Held answers the same question
// for the resource the lease guards (a stream, a download), so that resource
// refuses every request but its holder's. [Handler.ServeHTTP] lists the
// routes and their JSON bodies.
//
// # Other sites
//
// Every operation, Held included, refuses what a page of another site can
// make the user's browser send: a request that Sec-Fetch-Site (or, from a
// browser without it, an Origin other than the Host) marks as cross-site,
// whatever its method or content type, and a request whose Host is not one
// the server answers to (Options.Hosts), which is how a page under a
// DNS-rebinding name would reach a server on 127.0.0.1. Clients that are
// not browsers send neither header and pass.
//
// # Errors
//
// Every refusal and error is a JSON body {"error_code": ..., "message": ...}
// with a stable code and a fitting status:
//
//	code                    status  when
//	overloaded              503     the admission gate is closed (lease.ErrOverloaded)
//	holder_has_lease        409     the holder already has a live lease (lease.ErrHolderHasLease)
//	over_capacity           429     no requested cost fits in the budget (lease.ErrOverCapacity)
//	recovering              503     the store lost its state and refuses grants for a while (lease.ErrRecovering)
//	bad_json                400     the body is not one JSON object of the expected shape
//	invalid_argument        400     the decoded request is refused (lease.ErrInvalid)
//	body_too_large          413     the body is longer than Options.MaxBody
//	unsupported_media_type  415     a grant's Content-Type is not application/json
//	no_holder               401     the holder function found no holder in the request
//	not_holder              403     the lease belongs to another holder (lease.ErrWrongHolder; checked in the store, atomically)
//	not_found               404     no such lease (never granted, released, or swept)
//	cross_site              403     a page of another site made the browser send the request
//	unknown_host            403     the Host is not a loopback name, an address or one of Options.Hosts
//	expired                 410     the lease has expired
//	unavailable             503     the Manager is closed, or the request was cancelled
//	internal                500     the store failed; the message says no more
//
// [ProblemFor] gives the Problem of any error, and [Handler.Error] answers
// it: a server that speaks an API of its own (other routes, bodies, codes,
// or its users' language) calls the lease.Manager in handlers of its own
// and answers their errors with these, rewriting the Problem first if it
// must.
//
// # The JavaScript client
//
// ClientScript serves leasehttp.js, an ES module with one class, LeaseClient:
// it grants, heartbeats at an interval, releases when asked, when the page
// is closed (pagehide, with a keepalive request) and when the page goes to
// the background (visibilitychange), and calls back when the lease is lost
// (the server refused a heartbeat, or no heartbeat got through within the
// grace) or its TTL is reached. See the file's header for its options.
package leasehttp
