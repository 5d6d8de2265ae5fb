// Package pgttl keeps the ttl.Store, the source of truth that decides
// expiry, in a PostgreSQL table (pgx v5):
//
//	store, err := pgttl.New(pool, pgttl.Options{Table: "entities"})
//	if err != nil { ... }
//	if err := store.Migrate(ctx); err != nil { ... }
//	runner, err := ttl.NewRunner(store, rules, ttl.RunnerOptions{Wake: wake})
//
// The table has the columns id, phase, desired_state, operation,
// last_activity_at, phase_changed_at, created_at and deleted_at, plus
// last_activity_bucket, a generated column that lets an index serve the
// idle rules without making every merge rewrite index entries.
// [Store.Migrate] creates it with partial indexes that serve the rules. The
// Store reads and writes only what the Runner needs: it merges activity
// into last_activity_at and sets desired_state when a rule fires. The rows
// themselves, their phase and operation (the rules leave a row alone while
// its operation is not [Options.NoOperation], and once deleted_at is set)
// are the system's, which writes them with its own SQL. A table laid out
// by a design of its own keeps its names: [Options.LastActivityColumn]
// renames last_activity_at (last_access_at), and [Options.NoOperation] is
// what operation holds when none is in progress ('NONE'; the empty string
// by default).
//
// Every decision uses the server's now(): [Store.Add] is one UPDATE over
// unnest($1::text[], $2::timestamptz[]) with GREATEST, so a whole batch is
// one statement and a late batch never moves time back; [Store.Apply] is
// one conditional UPDATE ... WHERE <since> < now() - make_interval(secs =>
// $n) RETURNING id, so concurrent runners each get an entity at most once.
package pgttl
