package redislease_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ttlkit/ttlkit/lease"
	"github.com/ttlkit/ttlkit/lease/redislease"
)

// An admission server on Redis: every instance builds the same Manager
// over the same prefix, and they share one budget of 35 units. (This example
// needs a Redis server, so it is compiled but not run.)
func Example() {
	ctx := context.Background()
	client := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer client.Close()

	store, err := redislease.New(client, redislease.Options{Prefix: "camserver:modal"})
	if err != nil {
		log.Fatal(err)
	}
	m, err := lease.New(35, lease.Options{Store: store, TTL: 300 * time.Second, Grace: 45 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	defer func() { _ = m.Close(ctx) }()

	l, err := m.Grant(ctx, lease.Request{Holder: "session-1", Resource: "cam_2f_19", Cost: 2, Fallback: []int{1}})
	var re *lease.RejectedError
	switch {
	case errors.As(err, &re):
		fmt.Println("rejected:", re.Err, "available", re.Available)
		return
	case err != nil:
		log.Fatal(err) // Redis unreachable: the grant may or may not have happened
	}
	fmt.Println("granted", l.Cost, "units, fencing token", l.Token)

	// The browser's heartbeat endpoint calls m.Heartbeat(ctx, l.ID); a
	// server-side holder can let KeepAlive do it.
	k := m.KeepAlive(ctx, l, 15*time.Second)
	defer func() { _ = k.Close(ctx) }()
	if _, err := m.Release(ctx, l.ID, ""); err != nil {
		log.Print(err)
	}
}

// The keys a store uses: one Redis Cluster hash slot per prefix.
func ExampleStore_Keys() {
	client := redis.NewClient(&redis.Options{Addr: "localhost:6379"}) // New does not dial
	defer client.Close()
	for _, prefix := range []string{"cams", "app:{cams}:"} {
		s, err := redislease.New(client, redislease.Options{Prefix: prefix})
		if err != nil {
			panic(err)
		}
		fmt.Println(s.Keys())
	}
	_, err := redislease.New(client, redislease.Options{})
	fmt.Println(err)
	// Output:
	// [{cams}:leases {cams}:deadlines {cams}:expired {cams}:holders {cams}:state {cams}:released {cams}:receipts {cams}:receipted]
	// [app:{cams}:leases app:{cams}:deadlines app:{cams}:expired app:{cams}:holders app:{cams}:state app:{cams}:released app:{cams}:receipts app:{cams}:receipted]
	// redislease: Prefix is empty
}
