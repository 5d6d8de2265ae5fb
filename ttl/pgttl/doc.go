// Package pgttl keeps the ttl.Store, the source of truth that decides
// expiry, in a PostgreSQL table (pgx v5), and wakes controllers in other
// processes through LISTEN/NOTIFY.
//
// The table has a cloud-IDE workspace table's columns: id, phase,
// desired_state, operation, last_activity_at (often last_access_at),
// phase_changed_at, created_at and deleted_at, plus last_activity_bucket, a
// generated column that lets an index serve the idle rules without making
// every sync rewrite index entries. Store.Migrate creates it with partial
// indexes that serve the rules. A table laid out by a design of its own
// keeps its names: Options.LastActivityColumn renames last_activity_at
// (last_access_at), and Options.NoOperation is what operation holds when
// none is in progress ('NONE'; the empty string by default).
//
// Every decision uses the server's now(): MergeActivity is one UPDATE over
// unnest($1::text[], $2::timestamptz[]) with GREATEST, so a whole batch is
// one statement and a late batch never moves time back; Apply is one
// conditional UPDATE ... WHERE <since> < now() - make_interval(secs => $n)
// RETURNING id, so concurrent runners each get an entity at most once.
//
// Notifier.WakeExpired sends the rules' decisions (ttl.Expiry: id, rule,
// desired state, the last activity it was based on, the decision time) with
// pg_notify, chunked below the 8000-byte payload limit, and Notifier.Wake
// bare ids; ListenExpired and Listen deliver them to a controller in another
// process over a dedicated connection.
package pgttl
