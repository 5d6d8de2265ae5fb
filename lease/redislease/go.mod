module github.com/ttlkit/ttlkit/lease/redislease

go 1.25.0

replace (
	github.com/ttlkit/ttlkit => ../..
	github.com/ttlkit/ttlkit/internal/redisrun => ../../internal/redisrun
	github.com/ttlkit/ttlkit/internal/testenv => ../../internal/testenv
	github.com/ttlkit/ttlkit/lease/internal/leasecheck => ../../lease/internal/leasecheck
	github.com/ttlkit/ttlkit/lease/sqllease => ../../lease/sqllease
	github.com/ttlkit/ttlkit/pool/docker => ../../pool/docker
	github.com/ttlkit/ttlkit/pool/redispool => ../../pool/redispool
	github.com/ttlkit/ttlkit/ttl/pgttl => ../../ttl/pgttl
	github.com/ttlkit/ttlkit/ttl/redisttl => ../../ttl/redisttl
)

require (
	github.com/redis/go-redis/v9 v9.22.0
	github.com/stretchr/testify v1.12.1
	github.com/ttlkit/ttlkit v0.0.0-00010101000000-000000000000
	github.com/ttlkit/ttlkit/internal/redisrun v0.0.0-00010101000000-000000000000
	github.com/ttlkit/ttlkit/internal/testenv v0.0.0-00010101000000-000000000000
	github.com/ttlkit/ttlkit/lease/internal/leasecheck v0.0.0-00010101000000-000000000000
	github.com/ttlkit/ttlkit/pool/redispool v0.0.0-00010101000000-000000000000
	github.com/ttlkit/ttlkit/ttl/redisttl v0.0.0-00010101000000-000000000000
)

require (
	github.com/anishathalye/porcupine v1.3.1 // indirect
	github.com/benbjohnson/clock v1.3.5 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	go.uber.org/goleak v1.3.0 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	golang.org/x/sys v0.47.0 // indirect
)
