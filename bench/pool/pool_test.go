package pool_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"sync"
	"testing"

	"github.com/jackc/puddle/v2"
	commonspool "github.com/jolestar/go-commons-pool/v2"

	"github.com/ttlkit/ttlkit/pool"
)

// conn is the pooled item: creating and destroying it is free, so the
// benchmark measures only the pools' bookkeeping.
type conn struct{ n int }

// impl sets up a pool of size items, all created and idle, and returns a
// worker that acquires and releases ops times, and a closer.
type impl struct {
	name  string
	setup func(b *testing.B, size int) (work func(ops int), close func())
}

var impls = []impl{
	{"ttlkit", setupTTLKit},
	{"puddle", setupPuddle},
	{"commonspool", setupCommonsPool},
	{"databasesql", setupDatabaseSQL},
	{"chan", setupChan},
}

// BenchmarkPoolAcquireRelease: clients goroutines share a pool of size
// items, each acquiring and at once releasing; b.N is the total number of
// acquire/release pairs, split evenly among the clients.
func BenchmarkPoolAcquireRelease(b *testing.B) {
	cases := []struct{ size, clients int }{{8, 1}, {8, 8}, {8, 64}, {8, 512}, {64, 64}, {64, 512}}
	for _, c := range cases {
		for _, im := range impls {
			b.Run(fmt.Sprintf("size=%d/clients=%d/impl=%s", c.size, c.clients, im.name), func(b *testing.B) {
				b.ReportAllocs()
				work, closeFn := im.setup(b, c.size)
				defer closeFn()
				run(b, c.clients, work)
			})
		}
	}
}

func run(b *testing.B, clients int, work func(ops int)) {
	var ready, done sync.WaitGroup
	start := make(chan struct{})
	for i := range clients {
		ops := b.N / clients
		if i < b.N%clients {
			ops++
		}
		ready.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			ready.Done()
			<-start
			work(ops)
		}()
	}
	ready.Wait()
	b.ResetTimer()
	close(start)
	done.Wait()
	b.StopTimer()
}

type prov struct{}

func (prov) Create(context.Context) (*conn, error) { return &conn{}, nil }
func (prov) Destroy(context.Context, *conn) error  { return nil }

func setupTTLKit(b *testing.B, size int) (func(int), func()) {
	p, err := pool.New[*conn](prov{}, pool.Options{MaxSize: size, JanitorInterval: -1, IdleTimeout: -1, MaxLifetime: -1})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	hs := make([]*pool.Handle[*conn], size)
	for i := range hs {
		if hs[i], err = p.Acquire(ctx); err != nil {
			b.Fatal(err)
		}
	}
	for _, h := range hs {
		h.Release()
	}
	work := func(ops int) {
		for range ops {
			h, err := p.Acquire(ctx)
			if err != nil {
				panic(err)
			}
			h.Value().n++
			h.Release()
		}
	}
	return work, func() {
		if err := p.Close(ctx); err != nil {
			b.Error(err)
		}
	}
}

func setupPuddle(b *testing.B, size int) (func(int), func()) {
	p, err := puddle.NewPool(&puddle.Config[*conn]{
		Constructor: func(context.Context) (*conn, error) { return &conn{}, nil },
		Destructor:  func(*conn) {},
		MaxSize:     int32(size),
	})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	rs := make([]*puddle.Resource[*conn], size)
	for i := range rs {
		if rs[i], err = p.Acquire(ctx); err != nil {
			b.Fatal(err)
		}
	}
	for _, r := range rs {
		r.Release()
	}
	work := func(ops int) {
		for range ops {
			r, err := p.Acquire(ctx)
			if err != nil {
				panic(err)
			}
			r.Value().n++
			r.Release()
		}
	}
	return work, p.Close
}

func setupCommonsPool(b *testing.B, size int) (func(int), func()) {
	ctx := context.Background()
	cfg := commonspool.NewDefaultPoolConfig()
	cfg.MaxTotal = size
	cfg.MaxIdle = size
	cfg.BlockWhenExhausted = true
	p := commonspool.NewObjectPool(ctx, commonspool.NewPooledObjectFactorySimple(
		func(context.Context) (any, error) { return &conn{}, nil }), cfg)
	objs := make([]any, size)
	for i := range objs {
		var err error
		if objs[i], err = p.BorrowObject(ctx); err != nil {
			b.Fatal(err)
		}
	}
	for _, o := range objs {
		if err := p.ReturnObject(ctx, o); err != nil {
			b.Fatal(err)
		}
	}
	work := func(ops int) {
		for range ops {
			o, err := p.BorrowObject(ctx)
			if err != nil {
				panic(err)
			}
			o.(*conn).n++
			if err := p.ReturnObject(ctx, o); err != nil {
				panic(err)
			}
		}
	}
	return work, func() { p.Close(ctx) }
}

// noopDriver is a database/sql driver whose connections do nothing.
type noopDriver struct{}

func (noopDriver) Open(string) (driver.Conn, error) { return noopConn{}, nil }

type noopConn struct{}

func (noopConn) Prepare(string) (driver.Stmt, error) { return nil, driver.ErrSkip }
func (noopConn) Close() error                        { return nil }
func (noopConn) Begin() (driver.Tx, error)           { return nil, driver.ErrSkip }

func init() { sql.Register("ttlkit-bench-noop", noopDriver{}) }

func setupDatabaseSQL(b *testing.B, size int) (func(int), func()) {
	db, err := sql.Open("ttlkit-bench-noop", "")
	if err != nil {
		b.Fatal(err)
	}
	db.SetMaxOpenConns(size)
	db.SetMaxIdleConns(size)
	ctx := context.Background()
	cs := make([]*sql.Conn, size)
	for i := range cs {
		if cs[i], err = db.Conn(ctx); err != nil {
			b.Fatal(err)
		}
	}
	for _, c := range cs {
		_ = c.Close()
	}
	work := func(ops int) {
		for range ops {
			c, err := db.Conn(ctx)
			if err != nil {
				panic(err)
			}
			if err := c.Close(); err != nil {
				panic(err)
			}
		}
	}
	return work, func() { _ = db.Close() }
}

func setupChan(_ *testing.B, size int) (func(int), func()) {
	ch := make(chan *conn, size)
	for range size {
		ch <- &conn{}
	}
	work := func(ops int) {
		for range ops {
			c := <-ch
			c.n++
			ch <- c
		}
	}
	return work, func() {}
}
