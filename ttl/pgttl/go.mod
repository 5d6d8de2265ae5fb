module github.com/ttlkit/ttlkit/ttl/pgttl

go 1.25.0

replace (
	github.com/ttlkit/ttlkit => ../..
	github.com/ttlkit/ttlkit/internal/redisrun => ../../internal/redisrun
	github.com/ttlkit/ttlkit/internal/testenv => ../../internal/testenv
	github.com/ttlkit/ttlkit/lease/internal/leasecheck => ../../lease/internal/leasecheck
	github.com/ttlkit/ttlkit/lease/redislease => ../../lease/redislease
	github.com/ttlkit/ttlkit/lease/sqllease => ../../lease/sqllease
	github.com/ttlkit/ttlkit/pool/docker => ../../pool/docker
	github.com/ttlkit/ttlkit/pool/redispool => ../../pool/redispool
	github.com/ttlkit/ttlkit/ttl/redisttl => ../../ttl/redisttl
)

require (
	github.com/jackc/pgx/v5 v5.12.0
	github.com/stretchr/testify v1.12.1
	github.com/ttlkit/ttlkit v0.0.0-00010101000000-000000000000
	github.com/ttlkit/ttlkit/internal/testenv v0.0.0-00010101000000-000000000000
)

require (
	github.com/benbjohnson/clock v1.3.5 // indirect
	github.com/jackc/pgpassfile v1.0.0 // indirect
	github.com/jackc/pgservicefile v0.0.0-20240606120523-5a60cdf6a761 // indirect
	github.com/jackc/puddle/v2 v2.2.3 // indirect
	go.uber.org/goleak v1.3.0 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	golang.org/x/sync v0.22.0 // indirect
	golang.org/x/text v0.41.0 // indirect
)
