package hysteresis_test

import (
	"context"
	"fmt"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/ttlkit/ttlkit/hysteresis"
)

// A CPU signal with the thresholds of an admission controller: warn at 70 %,
// trip at 85 %, and reopen only after a minute below 60 %.
func Example() {
	clk := clock.NewMock() // the example controls time; programs leave Clock nil
	start := clk.Now()
	var changes []string // written by OnEvent, read after Close
	gate, err := hysteresis.New([]hysteresis.Signal{
		{Name: "cpu", Warn: 70, Trip: 85, Recover: 60},
	}, hysteresis.Options{
		Hold:  time.Minute,
		Clock: clk,
		OnEvent: func(e hysteresis.Event) {
			why := "every signal calm for the hold"
			if e.Signal != "" {
				why = fmt.Sprintf("%s %g reached %g", e.Signal, e.Value, e.Threshold)
			}
			changes = append(changes, fmt.Sprintf("at %v: %s -> %s (%s)", e.Time.Sub(start), e.From, e.To, why))
		},
	})
	if err != nil {
		panic(err)
	}

	for _, cpu := range []float64{50, 75, 90, 80, 86, 55, 55, 65, 40, 40, 40} {
		if err := gate.Observe("cpu", cpu); err != nil {
			panic(err)
		}
		clk.Add(20 * time.Second)
	}
	// 60 s after the first 40 %: the hold has elapsed. State evaluates the
	// gate without a sample.
	fmt.Println("state:", gate.State())
	// OnEvent runs on the gate's own goroutine; Close delivers what is
	// queued and waits for it.
	if err := gate.Close(context.Background()); err != nil {
		panic(err)
	}
	for _, c := range changes {
		fmt.Println(c)
	}
	// Output:
	// state: normal
	// at 20s: normal -> warning (cpu 75 reached 70)
	// at 40s: warning -> overloaded (cpu 90 reached 85)
	// at 3m40s: overloaded -> normal (every signal calm for the hold)
}

// ObserveAll records one sampling round: any signal trips the gate, and all
// of them must be calm to recover.
func ExampleGate_ObserveAll() {
	gate, err := hysteresis.New([]hysteresis.Signal{
		{Name: "cpu", Warn: 70, Trip: 85, Recover: 60},
		{Name: "memory", Warn: 75, Trip: 90, Recover: 70},
	}, hysteresis.Options{Hold: -1})
	if err != nil {
		panic(err)
	}
	for _, round := range []map[string]float64{
		{"cpu": 30, "memory": 50},
		{"cpu": 30, "memory": 92}, // memory alone trips
		{"cpu": 30, "memory": 80}, // below Trip, not below Recover
		{"cpu": 30, "memory": 60}, // every signal calm (a negative Hold: no hold)
	} {
		if err := gate.ObserveAll(round); err != nil {
			panic(err)
		}
		fmt.Println(gate.State())
	}
	// Output:
	// normal
	// overloaded
	// overloaded
	// normal
}

func ExampleNew_invalid() {
	_, err := hysteresis.New([]hysteresis.Signal{
		{Name: "cpu", Warn: 70, Trip: 85, Recover: 90},
	}, hysteresis.Options{})
	fmt.Println(err)
	// Output: hysteresis: signal "cpu": Recover (90) above Trip (85)
}
