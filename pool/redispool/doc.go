// Package redispool is a pool.Inventory on Redis: one warm pool shared by
// several pool.Pool instances in several processes (the backend instances of
// an AI assistant sharing their pre-started sandbox containers).
//
// Give every instance its own pool.Pool with the same Provisioner type, an
// Inventory with the same Options.Prefix, and its own Options.Instance name:
//
//	inv, err := redispool.New(rdb, redispool.Options{Prefix: "workspace:warm"})
//	p, err := pool.New(prov, pool.Options{MinIdle: 2, MaxIdle: 10, Inventory: inv})
//
// Then an idle item is handed to exactly one holder in the fleet (an atomic
// pop in a Lua script), the warm target and the idle limit count every
// instance's items, every item in use is registered under its instance so
// that reconciliation on any instance leaves it alone, and the records of an
// instance that crashed expire (Redis key expiry, on the server's clock)
// instead of protecting its items forever: reconciliation then destroys
// them as orphans.
//
// All keys share one Redis Cluster hash tag, so the package works on a
// cluster as on a single server; see Options.Prefix for the key layout.
// Scripts call TIME before writing, which Redis allows with effects
// replication: the default since Redis 5 and the only mode since Redis 7.
// So the package needs Redis 5 or later.
package redispool
