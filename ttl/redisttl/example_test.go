package redisttl_test

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ttlkit/ttlkit/ttl"
	"github.com/ttlkit/ttlkit/ttl/redisttl"
)

// New does not contact the server. The prefix "app" gives the key
// {app}:activity, hash-tagged so that it works on a Redis Cluster too; a
// prefix whose "}" would end the tag early is refused.
func ExampleNew() {
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer client.Close()
	_, err := redisttl.New(client, redisttl.Options{Prefix: "app"})
	fmt.Println(err)
	_, err = redisttl.New(client, redisttl.Options{Prefix: "}app"})
	fmt.Println(err != nil)
	// Output:
	// <nil>
	// true
}

// Every proxy instance flushes its Tracker into the shared buffer; the TTL
// runner drains it into the Store on each tick. (Needs a Redis server.)
func ExampleBuffer() {
	ctx := context.Background()
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer client.Close()
	buf, err := redisttl.New(client, redisttl.Options{Prefix: "app"})
	if err != nil {
		panic(err)
	}
	tracker, err := ttl.NewTracker(buf, ttl.TrackerOptions{FlushInterval: 30 * time.Second})
	if err != nil {
		panic(err)
	}
	defer tracker.Close(ctx)
	tracker.Record("ws-1") // on every proxied request or WebSocket message
}
