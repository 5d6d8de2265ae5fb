package hysteresis_test

import (
	"fmt"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/ttlkit/ttlkit/hysteresis"
)

// A CPU signal with the thresholds of an admission controller: warn at 70 %,
// trip at 85 %, and reopen only after a minute below 60 %.
func Example() {
	clk := clock.NewMock() // the example controls time; programs leave Clock nil
	gate, err := hysteresis.New([]hysteresis.Signal{
		{Name: "cpu", Warn: 70, Trip: 85, Recover: 60},
	}, hysteresis.Options{
		Hold:  time.Minute,
		Clock: clk,
		OnChange: func(c hysteresis.Change) {
			fmt.Printf("  %s -> %s (%s)\n", c.From, c.To, c.Reason)
		},
	})
	if err != nil {
		panic(err)
	}

	for _, cpu := range []float64{50, 75, 90, 80, 86, 55, 55, 65, 40, 40, 40} {
		fmt.Printf("cpu %2.0f%%\n", cpu)
		if err := gate.Observe("cpu", cpu); err != nil {
			panic(err)
		}
		clk.Add(20 * time.Second)
	}
	// 60 s after the first 40 %: the hold has elapsed. Check evaluates the
	// gate without a sample and delivers the change.
	fmt.Println("state:", gate.Check())
	// Output:
	// cpu 50%
	// cpu 75%
	//   normal -> warning (warn)
	// cpu 90%
	//   warning -> overloaded (trip)
	// cpu 80%
	// cpu 86%
	// cpu 55%
	// cpu 55%
	// cpu 65%
	// cpu 40%
	// cpu 40%
	// cpu 40%
	//   overloaded -> normal (recovered)
	// state: normal
}

// ObserveAll records one sampling round: any signal trips the gate, and all
// of them must be calm to recover.
func ExampleGate_ObserveAll() {
	gate, err := hysteresis.New([]hysteresis.Signal{
		{Name: "cpu", Warn: 70, Trip: 85, Recover: 60},
		{Name: "memory", Warn: 75, Trip: 90, Recover: 70},
	}, hysteresis.Options{})
	if err != nil {
		panic(err)
	}
	for _, round := range []map[string]float64{
		{"cpu": 30, "memory": 50},
		{"cpu": 30, "memory": 92}, // memory alone trips
		{"cpu": 30, "memory": 80}, // below Trip, not below Recover
		{"cpu": 30, "memory": 60}, // every signal calm (no hold set)
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
