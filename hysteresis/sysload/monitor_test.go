package sysload_test

import (
	"context"
	"errors"
	"math"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/hysteresis"
	"github.com/ttlkit/ttlkit/hysteresis/sysload"
	"github.com/ttlkit/ttlkit/internal/leakcheck"
)

func TestMain(m *testing.M) { leakcheck.VerifyTestMain(m) }

// script is a Sampler that plays back loads (and errors), then repeats the last.
type script struct {
	mu    sync.Mutex
	steps []step
	calls int
}

type step struct {
	load sysload.Load
	err  error
}

func (s *script) Sample(ctx context.Context) (sysload.Load, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.steps[min(s.calls, len(s.steps)-1)]
	s.calls++
	st.load.At = time.Now()
	return st.load, st.err
}

// list is a slice appended to by callbacks and read by the test.
type list[T any] struct {
	mu    sync.Mutex
	items []T
}

func (l *list[T]) add(v T) {
	l.mu.Lock()
	l.items = append(l.items, v)
	l.mu.Unlock()
}

func (l *list[T]) get() []T {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]T(nil), l.items...)
}

func load(cpu, mem float64, swapMiB uint64) step {
	return step{load: sysload.Load{CPU: cpu, Memory: mem, Swap: swapMiB * mib}}
}

func TestMonitorFeedsGateEveryInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		steps := []step{load(30, 40, 0), load(50, 40, 120)} // swap trips at the 2nd sample
		for range 59 {
			steps = append(steps, load(50, 40, 10))
		}
		steps = append(steps, load(50, 40, 60)) // 60 MiB: not below Recover, restarts the hold
		steps = append(steps, load(10, 10, 0))
		sampler := &script{steps: steps}

		var changes list[hysteresis.Event]
		gate, err := hysteresis.New(signals(), hysteresis.Options{
			Hold: time.Minute, StaleAfter: 5 * time.Second,
			OnEvent: changes.add,
		})
		require.NoError(t, err)
		defer gate.Close(context.Background())
		var samples list[sysload.Load]
		m, err := sysload.NewMonitor(sampler, gate, sysload.MonitorOptions{
			OnSample: func(l sysload.Load) {
				require.Equal(t, l.At, gate.Last()[0].At, "OnSample runs after the gate was fed")
				samples.add(l)
			},
		})
		require.NoError(t, err)
		defer m.Close(context.Background())
		start := time.Now()

		synctest.Wait()
		assert.Empty(t, samples.get(), "the first sample is one interval away")
		time.Sleep(time.Second)
		synctest.Wait()
		require.Len(t, samples.get(), 1)
		assert.Equal(t, hysteresis.Normal, gate.State())

		time.Sleep(time.Second)
		synctest.Wait()
		assert.True(t, gate.Overloaded(), "swap 120 MiB trips")
		require.Len(t, changes.get(), 1)
		assert.Equal(t, sysload.Swap, changes.get()[0].Signal)

		// 59 calm samples (3-61 s), one at Recover (62 s), calm from 63 s: back at 123 s.
		time.Sleep(120*time.Second + 500*time.Millisecond)
		synctest.Wait()
		assert.True(t, gate.Overloaded())
		time.Sleep(time.Second)
		synctest.Wait()
		assert.False(t, gate.Overloaded())
		assert.Equal(t, start.Add(123*time.Second), gate.Stats().Since)
		require.Len(t, changes.get(), 2)
		recovered := changes.get()[1]
		assert.Equal(t, hysteresis.Overloaded, recovered.From, "recovered")
		assert.Empty(t, recovered.Signal)
		assert.False(t, recovered.Stale)

		st := m.Stats()
		assert.EqualValues(t, 123, st.Samples)
		assert.Zero(t, st.Errors)
		assert.Equal(t, 10.0, st.Last.CPU)

		require.NoError(t, m.Close(context.Background()))
		require.NoError(t, m.Close(context.Background()), "Close is idempotent")
		time.Sleep(time.Minute)
		assert.EqualValues(t, 123, m.Stats().Samples, "no sample after Close")
	})
}

func TestMonitorErrorsLetTheGateGoStale(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		boom := errors.New("read /proc/stat: too many open files")
		sampler := &script{steps: []step{load(10, 10, 0), load(10, 10, 0), {err: boom}}}
		var changes list[hysteresis.Event]
		gate, err := hysteresis.New(signals(), hysteresis.Options{
			StaleAfter: 5 * time.Second,
			OnEvent:    changes.add,
		})
		require.NoError(t, err)
		defer gate.Close(context.Background())
		var errs list[error]
		m, err := sysload.NewMonitor(sampler, gate, sysload.MonitorOptions{
			Interval: 2 * time.Second,
			OnError:  errs.add,
		})
		require.NoError(t, err)
		defer m.Close(context.Background())

		time.Sleep(4 * time.Second) // two good samples, at 2 s and 4 s
		synctest.Wait()
		time.Sleep(6 * time.Second) // errors at 6, 8, 10 s; stale at 9 s
		synctest.Wait()
		assert.Equal(t, hysteresis.Warning, gate.State())
		require.Len(t, changes.get(), 1, "the Monitor's read of the gate noticed the stale transition")
		assert.True(t, changes.get()[0].Stale)
		assert.Len(t, errs.get(), 3)
		st := m.Stats()
		assert.EqualValues(t, 2, st.Samples)
		assert.EqualValues(t, 3, st.Errors)
		assert.ErrorIs(t, st.LastError, boom)
	})
}

func TestMonitorStepFeedsOnlyTheGatesSignals(t *testing.T) {
	gate, err := hysteresis.New([]hysteresis.Signal{{Name: sysload.CPU, Trip: 85, Recover: 60}}, hysteresis.Options{Hold: -1})
	require.NoError(t, err)
	m, err := sysload.NewMonitor(&script{steps: []step{load(90, 99, 500)}}, gate, sysload.MonitorOptions{Interval: time.Hour})
	require.NoError(t, err)
	defer m.Close(context.Background())
	l, err := m.Step(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 90.0, l.CPU)
	assert.True(t, gate.Overloaded())
	assert.EqualValues(t, 1, gate.Stats().Samples)
	assert.Zero(t, gate.Stats().Rejected)
}

func TestNewMonitorRejectsBadInput(t *testing.T) {
	other, err := hysteresis.New([]hysteresis.Signal{{Name: "queue", Trip: 10, Recover: 5}}, hysteresis.Options{Hold: -1})
	require.NoError(t, err)
	_, err = sysload.NewMonitor(&script{}, other, sysload.MonitorOptions{})
	assert.ErrorIs(t, err, hysteresis.ErrInvalid)
	assert.EqualError(t, err, "sysload: gate watches none of cpu, memory, swap")

	gate, err := hysteresis.New(signals(), hysteresis.Options{Hold: -1})
	require.NoError(t, err)
	_, err = sysload.NewMonitor(nil, gate, sysload.MonitorOptions{})
	assert.Error(t, err)
}

// TestMonitorNegativeIntervalRunsNoLoop: with a negative Interval the
// Monitor samples only when Step is called.
func TestMonitorNegativeIntervalRunsNoLoop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		gate, err := hysteresis.New(signals(), hysteresis.Options{Hold: -1})
		require.NoError(t, err)
		m, err := sysload.NewMonitor(&script{steps: []step{load(90, 10, 0)}}, gate, sysload.MonitorOptions{Interval: -1})
		require.NoError(t, err)
		time.Sleep(time.Hour)
		synctest.Wait()
		assert.Zero(t, m.Stats().Samples)
		_, err = m.Step(context.Background())
		require.NoError(t, err)
		assert.EqualValues(t, 1, m.Stats().Samples)
		assert.True(t, gate.Overloaded())
		require.NoError(t, m.Close(context.Background()))
	})
}

// TestMonitorCloseIsNotASamplingError: a sample cut short by Close (or by the
// caller's context in Step) is not a failure of the sampler: it is neither
// counted nor reported.
func TestMonitorCloseIsNotASamplingError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		gate, err := hysteresis.New(signals(), hysteresis.Options{Hold: -1})
		require.NoError(t, err)
		sampling := make(chan struct{}, 1)
		blocking := samplerFunc(func(ctx context.Context) (sysload.Load, error) {
			sampling <- struct{}{}
			<-ctx.Done()
			return sysload.Load{}, context.Cause(ctx)
		})
		var errs list[error]
		m, err := sysload.NewMonitor(blocking, gate, sysload.MonitorOptions{Interval: time.Second, OnError: errs.add})
		require.NoError(t, err)
		time.Sleep(time.Second)
		<-sampling // the loop is inside Sample
		require.NoError(t, m.Close(context.Background()))

		ctx, cancel := context.WithCancel(context.Background())
		go func() { <-sampling; cancel() }()
		_, err = m.Step(ctx)
		assert.ErrorIs(t, err, context.Canceled, "Step still returns the cause")

		assert.Empty(t, errs.get())
		assert.Zero(t, m.Stats().Errors)
		assert.NoError(t, m.Stats().LastError)
	})
}

// TestMonitorNaNSampleIsAnError: a custom Sampler that returns NaN has failed
// like one that returns an error: nothing is fed, and the failure is counted
// and reported.
func TestMonitorNaNSampleIsAnError(t *testing.T) {
	gate, err := hysteresis.New(signals(), hysteresis.Options{Hold: -1})
	require.NoError(t, err)
	var errs list[error]
	m, err := sysload.NewMonitor(&script{steps: []step{load(math.NaN(), 10, 0)}}, gate,
		sysload.MonitorOptions{Interval: time.Hour, OnError: errs.add})
	require.NoError(t, err)
	defer m.Close(context.Background())
	_, err = m.Step(context.Background())
	require.ErrorIs(t, err, hysteresis.ErrInvalid)
	require.Len(t, errs.get(), 1)
	assert.ErrorIs(t, errs.get()[0], hysteresis.ErrInvalid)
	st := m.Stats()
	assert.EqualValues(t, 1, st.Errors)
	assert.Zero(t, st.Samples)
	assert.ErrorIs(t, st.LastError, hysteresis.ErrInvalid)
	assert.Zero(t, gate.Stats().Samples)
}
