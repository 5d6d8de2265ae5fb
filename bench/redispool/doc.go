// Package redispool benchmarks a pool.Pool sharing its warm pool through
// pool/redispool against a hand-written Redis warm pool (LPOP of an
// ID, then the record; the record and RPUSH on return) and against bare
// PINGs, the round trips no shared pool can avoid.
package redispool
