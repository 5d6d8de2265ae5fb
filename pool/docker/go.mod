module github.com/ttlkit/ttlkit/pool/docker

go 1.25.0

replace (
	github.com/ttlkit/ttlkit => ../..
	github.com/ttlkit/ttlkit/internal/redisrun => ../../internal/redisrun
	github.com/ttlkit/ttlkit/internal/testenv => ../../internal/testenv
	github.com/ttlkit/ttlkit/lease/internal/leasecheck => ../../lease/internal/leasecheck
	github.com/ttlkit/ttlkit/lease/redislease => ../../lease/redislease
	github.com/ttlkit/ttlkit/lease/sqllease => ../../lease/sqllease
	github.com/ttlkit/ttlkit/pool/redispool => ../../pool/redispool
	github.com/ttlkit/ttlkit/ttl/pgttl => ../../ttl/pgttl
	github.com/ttlkit/ttlkit/ttl/redisttl => ../../ttl/redisttl
)

require (
	github.com/containerd/errdefs v1.0.0
	github.com/moby/moby/api v1.56.1
	github.com/moby/moby/client v0.6.2
	github.com/stretchr/testify v1.12.1
	github.com/ttlkit/ttlkit v0.0.0-00010101000000-000000000000
	github.com/ttlkit/ttlkit/internal/testenv v0.0.0-00010101000000-000000000000
)

require (
	github.com/Microsoft/go-winio v0.6.2 // indirect
	github.com/benbjohnson/clock v1.3.5 // indirect
	github.com/containerd/errdefs/pkg v0.3.0 // indirect
	github.com/distribution/reference v0.6.0 // indirect
	github.com/docker/go-connections v0.8.2 // indirect
	github.com/docker/go-units v0.5.0 // indirect
	github.com/felixge/httpsnoop v1.0.4 // indirect
	github.com/go-logr/logr v1.4.3 // indirect
	github.com/go-logr/stdr v1.2.2 // indirect
	github.com/moby/docker-image-spec v1.3.1 // indirect
	github.com/opencontainers/go-digest v1.0.0 // indirect
	github.com/opencontainers/image-spec v1.1.1 // indirect
	go.opentelemetry.io/auto/sdk v1.2.1 // indirect
	go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp v0.60.0 // indirect
	go.opentelemetry.io/otel v1.38.0 // indirect
	go.opentelemetry.io/otel/metric v1.38.0 // indirect
	go.opentelemetry.io/otel/trace v1.38.0 // indirect
	go.uber.org/goleak v1.3.0 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	golang.org/x/sys v0.47.0 // indirect
)
