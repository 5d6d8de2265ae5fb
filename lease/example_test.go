package lease_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/ttlkit/ttlkit/lease"
)

// Admission to video streams: a budget of 35 units, a main stream of 2
// units with a fallback to a 1-unit sub stream, one stream per holder.
func Example() {
	ctx := context.Background()
	m, err := lease.New(35, lease.Options{}) // TTL 300 s, grace 45 s
	if err != nil {
		panic(err)
	}
	defer func() { _ = m.Close(ctx) }()

	req := lease.Request{Holder: "session-1", Resource: "cam_2f_19", Cost: 2, Fallback: []int{1}}
	l, err := m.Grant(ctx, req)
	if err != nil {
		panic(err)
	}
	fmt.Println("granted cost", l.Cost, "token", l.Token, "ttl", l.ExpiresAt.Sub(l.CreatedAt))

	// A second lease for the same holder is refused, and the refusal names
	// the lease it already has.
	_, err = m.Grant(ctx, lease.Request{Holder: "session-1", Resource: "cam_1f_02", Cost: 1})
	var re *lease.RejectedError
	if errors.As(err, &re) && errors.Is(err, lease.ErrHolderHasLease) {
		fmt.Println("rejected: holder has a lease", re.Existing == l.ID)
	}

	hb, _ := m.Heartbeat(ctx, l.ID, "")
	fmt.Println("heartbeat, live for", hb.Remaining)

	units, _, _ := m.Usage(ctx)
	fmt.Printf("used %d of %d units\n", units, m.Stats().Budget)

	_, _ = m.Release(ctx, l.ID, "")
	_, err = m.Get(ctx, l.ID)
	fmt.Println(errors.Is(err, lease.ErrNotFound))
	// Output:
	// granted cost 2 token 1 ttl 5m0s
	// rejected: holder has a lease true
	// heartbeat, live for 45s
	// used 2 of 35 units
	// true
}

// A KeepAlive heartbeats a lease in the background until it is released.
func ExampleManager_KeepAlive() {
	ctx := context.Background()
	m, _ := lease.New(10, lease.Options{})
	defer func() { _ = m.Close(ctx) }()
	l, _ := m.Grant(ctx, lease.Request{Holder: "worker-1", Cost: 1})

	k := m.KeepAlive(ctx, l, 0) // every Grace/3
	// ... work while the lease is held; select on k.Done() to stop on loss.
	_, _ = m.Release(ctx, l.ID, "")
	<-k.Done()
	fmt.Println("stopped, err:", k.Err())
	// Output:
	// stopped, err: <nil>
}
