package gateway

import (
	"context"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/ttlkit/ttlkit/examples/gateway/template"
)

// A function's state, as Lambda's: a function whose code is being built
// (Config.Build) is Pending, and Lambda invokes no function before it is
// Active. The builds run in the background, the first function's alone
// and then at most Config.MaxBuilds at once, so the gateway serves the functions
// already built while the others build, and a build that fails leaves the
// others serving.

// State is a function's State in the Lambda API.
type State string

// The states of a function.
const (
	StatePending State = "Pending" // its code is being built; invocations are refused
	StateActive  State = "Active"  // it can be invoked
	StateFailed  State = "Failed"  // its build failed; invocations are refused
)

// The StateReasonCode of a function that is not Active, from the Lambda
// API's values: a build failed because the function's code package does
// not build, which is the nearest to Lambda's invalid deployment package.
const (
	ReasonCreating       = "Creating"
	ReasonInvalidPackage = "InvalidZipFileException"
)

// reasonCreating is the StateReason of a Pending function, Lambda's.
const reasonCreating = "The function is being created."

// maxStateReason bounds a Failed function's StateReason: the build's
// output, which the log holds whole.
const maxStateReason = 1000

// FunctionState is a function's state and, unless it is Active, why: its
// StateReason and StateReasonCode.
type FunctionState struct {
	State      State
	Reason     string
	ReasonCode string
}

// status is a function's state, with the command that runs it once
// Active (none for an image function).
type status struct {
	FunctionState
	cmd []string
}

var active = &status{FunctionState: FunctionState{State: StateActive}}

// cell holds a function's status; a build replaces what it holds.
type cell = atomic.Pointer[status]

func newCell(s *status) *cell {
	c := new(cell)
	c.Store(s)
	return c
}

// State returns the state of the function called name.
func (g *Gateway) State(name string) (FunctionState, bool) {
	c, ok := g.fns.Load().status[name]
	if !ok {
		return FunctionState{}, false
	}
	return c.Load().FunctionState, true
}

// status returns the status of the function called name: Active for one
// the gateway does not know (resolve answers for it).
func (g *Gateway) status(name string) *status {
	if c, ok := g.fns.Load().status[name]; ok {
		return c.Load()
	}
	return active
}

// conflict is the answer to an invocation of a function that is not
// Active, Lambda's.
func conflict(s State) *apiError {
	return &apiError{http.StatusConflict, "ResourceConflictException",
		"The operation cannot be performed at this time. The function is currently in the following state: " + string(s)}
}

// pendingBuild is a function to build into a cell; the first that Start
// begins leads: the others wait for it to end.
type pendingBuild struct {
	f    template.Function
	cell *cell
	lead bool
}

// startBuilds starts the builds of bs; each ends before Close returns.
// Those of Start count towards Built (first).
func (g *Gateway) startBuilds(bs []pendingBuild, first bool) {
	g.builds.Add(len(bs))
	for _, b := range bs {
		go g.build(b, first)
	}
}

// build builds b.f and stores its state in b.cell: Active with the
// command Config.Build returned, or Failed with its error. A build ended
// by Close leaves the function Pending.
func (g *Gateway) build(b pendingBuild, first bool) {
	defer g.builds.Done()
	if first {
		defer func() {
			if g.firstBuilds.Add(-1) == 0 {
				close(g.built)
			}
		}()
	}
	if b.lead {
		defer close(g.firstBuilt)
	} else {
		select {
		case <-g.firstBuilt:
		case <-g.buildCtx.Done():
			return
		}
	}
	select {
	case g.buildSlots <- struct{}{}:
	case <-g.buildCtx.Done():
		return
	}
	defer func() { <-g.buildSlots }()
	log := g.log.With("function", b.f.Name)
	log.Info("building")
	start := time.Now()
	cmd, err := g.cfg.Build(g.buildCtx, b.f)
	took := time.Since(start).Round(time.Millisecond)
	if g.buildCtx.Err() != nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if err != nil {
		log.Error("build failed", "took", took, "err", err)
		reason := err.Error()
		if len(reason) > maxStateReason {
			reason = reason[:maxStateReason] + "... (the gateway's log has the rest)"
		}
		b.cell.Store(&status{FunctionState: FunctionState{State: StateFailed, Reason: reason, ReasonCode: ReasonInvalidPackage}})
		return
	}
	log.Info("built", "took", took)
	b.cell.Store(&status{FunctionState: FunctionState{State: StateActive}, cmd: cmd})
	// Now that it runs, the function gets its warm minimum, unless a
	// reload replaced it meanwhile (Apply has set its limits then).
	fs := g.fns.Load()
	if fs.status[b.f.Name] != b.cell {
		return
	}
	f := fs.byName[b.f.Name]
	if err := g.setLimits(f.Name, f.Reserved, f.Provisioned); err != nil {
		log.Error("the warm minimum not applied", "err", err)
	}
}

// Built waits until the builds Start began have ended, every function
// Active or Failed, or ctx ends; it returns context.Cause(ctx) then.
func (g *Gateway) Built(ctx context.Context) error {
	select {
	case <-g.built:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}
