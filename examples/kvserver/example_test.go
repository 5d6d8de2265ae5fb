package main

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/redis/go-redis/v9"
)

// Example serves kvserver on a loopback port and uses it with go-redis,
// as with any Redis server.
func Example() {
	srv, err := New(Config{})
	if err != nil {
		panic(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	defer func() {
		_ = srv.Close()
		<-served
	}()

	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: ln.Addr().String(), Protocol: 2})
	defer rdb.Close()

	rdb.Set(ctx, "session:42", "alice", 30*time.Minute)
	fmt.Println(rdb.Get(ctx, "session:42").Val())
	fmt.Println(rdb.TTL(ctx, "session:42").Val())
	// go-redis reports Redis's -1 (no deadline) and -2 (missing) as -1ns, -2ns.
	fmt.Println(rdb.Persist(ctx, "session:42").Val(), rdb.TTL(ctx, "session:42").Val())
	fmt.Println(rdb.TTL(ctx, "missing").Val())
	fmt.Println(rdb.Expire(ctx, "session:42", -time.Second).Val(), rdb.Exists(ctx, "session:42").Val())
	// Output:
	// alice
	// 30m0s
	// true -1ns
	// -2ns
	// true 0
}
