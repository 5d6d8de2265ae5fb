package backend

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/ttlkit/ttlkit/examples/sandboxes/agent"
)

// Exec runs command in conv's sandbox (assigning one on the conversation's
// first request) with the given timeout (0 means ExecTimeout, more is an
// error) and returns its result. A sandbox that dies under it gives an
// error matching ErrSandboxDied and is replaced.
func (b *Backend) Exec(ctx context.Context, conv string, command []string, timeout time.Duration) (agent.ExecResult, error) {
	if err := agent.CheckCommand(command); err != nil {
		return agent.ExecResult{}, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if _, err := b.timeoutOf(timeout.Seconds()); err != nil {
		return agent.ExecResult{}, err
	}
	if timeout == 0 {
		timeout = b.cfg.ExecTimeout
	}
	rec, done, err := b.begin(ctx, conv, timeout, true)
	if err != nil {
		b.m.execOne("refused", 0)
		return agent.ExecResult{}, err
	}
	defer done()
	// The agent kills the command at its timeout; the call's own bound
	// only matters for an agent that hangs.
	ectx, cancel := context.WithTimeout(ctx, timeout+15*time.Second)
	defer cancel()
	start := time.Now()
	res, err := b.agent(rec.Sandbox).Exec(ectx, agent.ExecRequest{Command: command, TimeoutSec: timeout.Seconds()})
	if err != nil {
		err = b.failed(ctx, conv, rec, err)
		b.m.execOne("sandbox_died", time.Since(start))
		return agent.ExecResult{}, err
	}
	outcome := "ok"
	switch {
	case res.TimedOut:
		outcome = "timeout"
	case res.ExitCode != 0:
		outcome = "nonzero_exit"
	}
	b.m.execOne(outcome, time.Since(start))
	return res, nil
}

// timeoutOf returns an exec's timeout_sec as a duration (0 means
// ExecTimeout), or an error matching ErrInvalid when it is negative or over
// ExecTimeout. The seconds are checked before they become a duration,
// which a huge number would overflow.
func (b *Backend) timeoutOf(sec float64) (time.Duration, error) {
	switch {
	case sec < 0:
		return 0, fmt.Errorf("%w: timeout_sec (%v) is negative", ErrInvalid, sec)
	case sec > b.cfg.ExecTimeout.Seconds():
		return 0, fmt.Errorf("%w: timeout_sec (%v) is over the limit of %v", ErrInvalid, sec, b.cfg.ExecTimeout.Seconds())
	}
	return time.Duration(sec * float64(time.Second)), nil
}

// failed turns an agent call's error into the request's: a sandbox that no
// longer answers is destroyed (unless a destroy already took it) and the
// error matches ErrSandboxDied.
func (b *Backend) failed(ctx context.Context, conv string, rec Record, err error) error {
	var aerr *agent.Error
	if errors.As(err, &aerr) {
		return aerr // the sandbox refused the request: its status stands
	}
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	if !errors.Is(err, agent.ErrUnreachable) {
		return err
	}
	now, ok, gerr := b.cfg.Assignments.Get(context.WithoutCancel(ctx), conv)
	if gerr == nil && ok && now.Sandbox.ID == rec.Sandbox.ID && now.Status == StatusDraining {
		return fmt.Errorf("%w (it was being destroyed): %v", ErrSandboxDied, err)
	}
	b.log.Warn("sandbox died during a request; replacing it", "conversation", conv, "sandbox", short(rec.Sandbox.ID), "err", err)
	b.destroyLater(conv, rec.Sandbox.ID, ReasonUnhealthy)
	return fmt.Errorf("%w (%v); it is being replaced, and the conversation's next request gets a new sandbox with its archived files", ErrSandboxDied, err)
}

// File returns the agent's reply to GET /files/path in conv's sandbox (a
// file's bytes, or a directory's JSON listing), for the caller to copy
// out and close; it ends the request when closed. A conversation without
// a sandbox gets one only if it has archived files.
func (b *Backend) File(ctx context.Context, conv, path string) (*http.Response, error) {
	// The agent gets the cleaned path: one with "//" or "." in it would
	// be redirected there, and the redirect followed as another request.
	p, err := agent.CleanPath(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	rec, done, err := b.begin(ctx, conv, b.cfg.ExecTimeout, false)
	if err != nil {
		return nil, err
	}
	resp, err := b.agent(rec.Sandbox).File(ctx, p)
	if err != nil {
		done()
		return nil, b.failed(ctx, conv, rec, err)
	}
	resp.Body = &doneCloser{ReadCloser: resp.Body, done: done}
	return resp, nil
}

type doneCloser struct {
	io.ReadCloser
	done func()
}

func (d *doneCloser) Close() error {
	err := d.ReadCloser.Close()
	d.done()
	return err
}

// WriteFile writes r (size bytes, -1 if unknown) to path in conv's
// sandbox, assigning one on the conversation's first request, and returns
// the agent's JSON reply.
func (b *Backend) WriteFile(ctx context.Context, conv, path string, r io.Reader, size int64) ([]byte, error) {
	p, err := agent.CleanPath(path)
	if err != nil || p == "." {
		return nil, fmt.Errorf("%w: file path %q: not a file under the work directory", ErrInvalid, path)
	}
	rec, done, err := b.begin(ctx, conv, b.cfg.ExecTimeout, true)
	if err != nil {
		return nil, err
	}
	defer done()
	out, err := b.agent(rec.Sandbox).WriteFile(ctx, p, r, size)
	if err != nil {
		return nil, b.failed(ctx, conv, rec, err)
	}
	return out, nil
}

// State is what GET /conversations/{id} shows.
type State struct {
	Conversation string    `json:"conversation"`
	Status       string    `json:"status"` // running, idle, draining, or archived (no sandbox, files kept)
	ContainerID  string    `json:"container_id,omitempty"`
	Host         string    `json:"host,omitempty"`
	Port         int       `json:"port,omitempty"`
	CreatedAt    time.Time `json:"created_at,omitzero"`
	LastActiveAt time.Time `json:"last_active_at,omitzero"`
	InFlight     int       `json:"in_flight"`
	// IdleDestroyAt and LifetimeEndsAt are when the inactivity and the
	// absolute TTL end (the GC acts within one GC interval after).
	IdleDestroyAt  time.Time `json:"idle_destroy_at,omitzero"`
	LifetimeEndsAt time.Time `json:"lifetime_ends_at,omitzero"`
}

// State returns conv's state; ErrNotFound when it has neither a sandbox
// nor archived files. It does not count as activity.
func (b *Backend) State(ctx context.Context, conv string) (State, error) {
	if err := CheckConversation(conv); err != nil {
		return State{}, err
	}
	rec, ok, err := b.cfg.Assignments.Get(ctx, conv)
	if err != nil {
		return State{}, err
	}
	if !ok {
		if ok, err := b.archived(ctx, conv); err != nil {
			return State{}, err
		} else if ok {
			return State{Conversation: conv, Status: "archived"}, nil
		}
		return State{}, fmt.Errorf("%w %s: it has no sandbox and no archived files", ErrNotFound, conv)
	}
	s := State{
		Conversation: conv, Status: rec.Status, ContainerID: rec.Sandbox.ID,
		Host: rec.Sandbox.Host, Port: rec.Sandbox.Port, CreatedAt: rec.Sandbox.Created.UTC(),
		LastActiveAt: rec.LastActiveAt.UTC(), InFlight: rec.InFlight,
		LifetimeEndsAt: rec.Sandbox.Created.Add(b.cfg.AbsoluteTTL).UTC(),
	}
	if e, err := b.cfg.Entities.Get(ctx, entityID(conv, rec.Sandbox.ID)); err == nil {
		s.IdleDestroyAt = e.LastActivityAt.Add(b.cfg.InactivityTTL).UTC()
	}
	return s, nil
}

// Delete ends conv: its sandbox is destroyed (requests in flight get the
// grace to finish) and its archived files are deleted. ErrNotFound when it
// had neither.
func (b *Backend) Delete(ctx context.Context, conv string) error {
	if err := CheckConversation(conv); err != nil {
		return err
	}
	had, err := b.archived(ctx, conv)
	if err != nil {
		return err
	}
	// A sandbox another instance is destroying is waited for: its archive
	// is written before it goes, and must be deleted after.
	deadline := time.Now().Add(b.claimTTL())
	for {
		ents, err := b.conversationEntities(ctx, conv)
		if err != nil {
			return err
		}
		if len(ents) == 0 {
			break
		}
		had = true
		for _, e := range ents {
			_, sbID, _ := splitID(e.ID)
			if err := b.destroy(context.WithoutCancel(ctx), conv, sbID, ReasonDeleted, time.Time{}); err != nil {
				return err
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("conversation %s: its sandbox is still being destroyed by another instance", conv)
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(100 * time.Millisecond):
		}
	}
	if !had {
		return fmt.Errorf("%w %s: it has no sandbox and no archived files", ErrNotFound, conv)
	}
	return b.cfg.Archive.Delete(ctx, conv)
}
