package backend

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/ttlkit/ttlkit/examples/entities"
	"github.com/ttlkit/ttlkit/examples/sandboxes/sandbox"
)

// Adoption. Every assigned sandbox knows its conversation: its agent's
// owner, set when it is assigned, before its files are restored and before
// any command runs in it, and never changed after. So when the shared
// state loses assignments while their sandboxes run — Redis restarted
// empty, or a failover to a replica that had not received them — nothing
// is lost with them:
//
//   - a conversation without a record first looks for a live sandbox of
//     its own and adopts it again (its entity and its record recreated)
//     instead of taking a new one: the conversation keeps its sandbox, its
//     files and what runs in it, and never has two;
//   - the pool's reconciliation asks the owner of every sandbox it would
//     take for an orphan, and spares those of a conversation: the backend
//     adopts them for their conversations, so that their TTLs run again
//     (and a sandbox found beside the one its conversation already has is
//     destroyed with its files archived, as a stale one).
//
// The owners learned are kept in memory (an owner never changes): each
// sandbox is asked once per instance.

// ownerCache is what this instance learned of the sandboxes' owners.
type ownerCache struct {
	mu sync.Mutex
	m  map[string]string // sandbox id → conversation
}

func (c *ownerCache) get(id string) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	conv, ok := c.m[id]
	return conv, ok
}

func (c *ownerCache) set(id, conv string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]string{}
	}
	c.m[id] = conv
}

// keep forgets the sandboxes not in live (destroyed).
func (c *ownerCache) keep(live map[string]bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for id := range c.m {
		if !live[id] {
			delete(c.m, id)
		}
	}
}

// ownedSandbox is a live sandbox and the conversation it belongs to.
type ownedSandbox struct {
	conv string
	sb   sandbox.Sandbox
}

// owners lists the live sandboxes and returns those that belong to a
// conversation, among ids (nil: all). A sandbox whose agent does not
// answer is left out: it can neither say whose it is nor give its files.
func (b *Backend) owners(ctx context.Context, ids map[string]bool) ([]ownedSandbox, error) {
	listed, err := b.cfg.Provisioner.List(ctx)
	if err != nil {
		return nil, err
	}
	live := make(map[string]bool, len(listed))
	for _, l := range listed {
		live[l.ID] = true
	}
	b.ownerOf.keep(live)
	var (
		mu  sync.Mutex
		out []ownedSandbox
		wg  sync.WaitGroup
		sem = make(chan struct{}, 8)
	)
	for _, l := range listed {
		if ids != nil && !ids[l.ID] {
			continue
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			sb, conv, ok := b.askOwner(ctx, l.Value)
			if ok {
				mu.Lock()
				out = append(out, ownedSandbox{conv: conv, sb: sb})
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return out, nil
}

// askOwner returns sb's owner, from the cache or from its agent (sb's
// address resolved first if the listing lacks it); ok is false when it has
// none or does not answer.
func (b *Backend) askOwner(ctx context.Context, sb sandbox.Sandbox) (sandbox.Sandbox, string, bool) {
	if conv, ok := b.ownerOf.get(sb.ID); ok {
		return sb, conv, true
	}
	sb, err := b.resolve(ctx, sb)
	if err != nil {
		return sb, "", false
	}
	actx, cancel := context.WithTimeout(ctx, b.cfg.HealthTimeout)
	conv, err := b.agent(sb).Owner(actx)
	cancel()
	if err != nil || CheckConversation(conv) != nil {
		return sb, "", false
	}
	b.ownerOf.set(sb.ID, conv)
	return sb, conv, true
}

// resolve returns sb with its agent's address, which a provisioner's
// listing may lack (a container's address on its network).
func (b *Backend) resolve(ctx context.Context, sb sandbox.Sandbox) (sandbox.Sandbox, error) {
	if sb.Host != "" {
		return sb, nil
	}
	r, ok := b.cfg.Provisioner.(interface {
		Resolve(context.Context, sandbox.Sandbox) (sandbox.Sandbox, error)
	})
	if !ok {
		return sb, fmt.Errorf("sandbox %s: no address", short(sb.ID))
	}
	return r.Resolve(ctx, sb)
}

// adopt gives conv, which has no record and no entity, the live sandbox
// of its own that the shared state lost, if there is one: it is recorded
// again as the conversation's. Should there be several, the newest is
// adopted and the others are destroyed, their files archived first (so
// the newest's are archived last). The caller holds conv's claim
// (claim.go). It reports whether conv has a sandbox now.
func (b *Backend) adopt(ctx context.Context, conv string) (bool, error) {
	found, err := b.owners(ctx, nil)
	if err != nil {
		return false, err
	}
	var mine []sandbox.Sandbox
	for _, o := range found {
		if o.conv == conv {
			mine = append(mine, o.sb)
		}
	}
	if len(mine) == 0 {
		return false, nil
	}
	newest := mine[0]
	for _, sb := range mine[1:] {
		if sb.Created.After(newest.Created) {
			newest = sb
		}
	}
	for _, sb := range mine {
		if sb.ID != newest.ID {
			if err := b.destroyUnrecorded(ctx, conv, sb); err != nil {
				return false, err
			}
		}
	}
	if newest, err = b.resolve(ctx, newest); err != nil {
		return false, err
	}
	return b.readopt(ctx, conv, newest)
}

// readopt records sb as conv's again: its entity (running, dated from
// the sandbox's creation for the absolute TTL), then its record. If
// another record was made meanwhile, sb is destroyed as stale. It reports
// whether conv has a record (naming sb unless one was made meanwhile).
func (b *Backend) readopt(ctx context.Context, conv string, sb sandbox.Sandbox) (bool, error) {
	id := entityID(conv, sb.ID)
	now := time.Now()
	_, err := b.cfg.Entities.Create(ctx, entities.Entity{
		ID: id, Phase: PhaseRunning, CreatedAt: sb.Created, LastActivityAt: now, PhaseChangedAt: now,
	})
	if err != nil && !errors.Is(err, entities.ErrExists) {
		return false, err
	}
	created, existing, err := b.cfg.Assignments.Create(ctx, Record{Conversation: conv, Sandbox: sb}, b.recordTTL())
	if err != nil {
		return false, err
	}
	if !created && existing.Sandbox.ID != sb.ID {
		b.destroyLater(conv, sb.ID, ReasonStale)
		return true, nil
	}
	if created {
		b.m.adoptedOne()
		b.log.Warn("sandbox adopted again: its assignment was lost from the shared state", "conversation", conv,
			"sandbox", short(sb.ID), "addr", sb.Addr())
	}
	return true, nil
}

// destroyUnrecorded destroys sb, a sandbox of conv that the shared state
// does not know, with its files archived: it is given an entity first, for
// the destroy's claim.
func (b *Backend) destroyUnrecorded(ctx context.Context, conv string, sb sandbox.Sandbox) error {
	now := time.Now()
	_, err := b.cfg.Entities.Create(ctx, entities.Entity{
		ID: entityID(conv, sb.ID), Phase: PhaseRunning, CreatedAt: sb.Created, LastActivityAt: now, PhaseChangedAt: now,
	})
	if err != nil && !errors.Is(err, entities.ErrExists) {
		return err
	}
	return b.destroy(ctx, conv, sb.ID, ReasonStale, time.Time{})
}

// adoptOrphan is adopt for a sandbox the pool's reconciliation found
// without an entity, in the background: under conv's claim, it
// is adopted if conv has neither a record nor another sandbox, and
// destroyed as stale (its files archived) if conv has another. A busy claim
// leaves it to the next pass, or to conv's next request.
func (b *Backend) adoptOrphan(o ownedSandbox) {
	b.wg.Go(func() {
		select {
		case b.sem <- struct{}{}:
		case <-b.ctx.Done():
			return
		}
		defer func() { <-b.sem }()
		ctx, cancel := context.WithTimeout(b.ctx, b.cfg.AssignTimeout)
		defer cancel()
		if err := b.adoptLocked(ctx, o); err != nil && ctx.Err() == nil {
			b.log.Warn("adopting a sandbox failed", "conversation", o.conv, "sandbox", short(o.sb.ID), "err", err)
		}
	})
}

func (b *Backend) adoptLocked(ctx context.Context, o ownedSandbox) error {
	release, err := b.claimConversation(ctx, o.conv)
	if err != nil || release == nil {
		return err
	}
	defer release()
	if _, err := b.cfg.Entities.Get(ctx, entityID(o.conv, o.sb.ID)); err == nil {
		return nil // adopted meanwhile
	} else if !errors.Is(err, entities.ErrNotFound) {
		return err
	}
	rec, ok, err := b.cfg.Assignments.Get(ctx, o.conv)
	if err != nil {
		return err
	}
	if ok && rec.Sandbox.ID != o.sb.ID {
		return b.destroyUnrecorded(ctx, o.conv, o.sb)
	}
	ents, err := b.conversationEntities(ctx, o.conv)
	if err != nil || len(ents) > 0 {
		return err // another sandbox of conv is being assigned or destroyed: the next pass decides
	}
	sb, err := b.resolve(ctx, o.sb)
	if err != nil {
		return err
	}
	_, err = b.readopt(ctx, o.conv, sb)
	return err
}
