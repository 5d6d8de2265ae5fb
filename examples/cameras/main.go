// Command cameras is a camera admission server: a page of live cameras
// whose full-size streams are scarce, handed out as leases from a shared
// budget, with heartbeats, an overload gate on this machine's CPU, memory
// and swap, and admission metrics kept for 24 hours.
//
//	go run ./examples/cameras            # then open http://127.0.0.1:8080
//	go run ./examples/cameras -help      # every setting, flag and environment variable
//
// Several instances share one budget through MySQL, PostgreSQL or Redis:
//
//	go run ./examples/cameras -store mysql -dsn 'root@tcp(127.0.0.1:3306)/cameras' -addr 127.0.0.1:8081
//
// See README.md for a walk-through.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return
		}
		fmt.Fprintln(os.Stderr, "cameras:", err)
		os.Exit(1)
	}
}
