module github.com/ttlkit/ttlkit/examples

go 1.25.0

replace (
	github.com/ttlkit/ttlkit => ..
	github.com/ttlkit/ttlkit/internal/redisrun => ../internal/redisrun
	github.com/ttlkit/ttlkit/internal/testenv => ../internal/testenv
	github.com/ttlkit/ttlkit/lease/internal/leasecheck => ../lease/internal/leasecheck
	github.com/ttlkit/ttlkit/lease/redislease => ../lease/redislease
	github.com/ttlkit/ttlkit/lease/sqllease => ../lease/sqllease
	github.com/ttlkit/ttlkit/metrics => ../metrics
	github.com/ttlkit/ttlkit/pool/docker => ../pool/docker
	github.com/ttlkit/ttlkit/pool/redispool => ../pool/redispool
	github.com/ttlkit/ttlkit/ttl/pgttl => ../ttl/pgttl
	github.com/ttlkit/ttlkit/ttl/redisttl => ../ttl/redisttl
)

require (
	github.com/aws/aws-lambda-go v1.54.0
	github.com/aws/aws-sdk-go-v2 v1.48.0
	github.com/aws/aws-sdk-go-v2/credentials v1.20.16
	github.com/aws/aws-sdk-go-v2/service/lambda v1.114.3
	github.com/aws/smithy-go v1.28.9
	github.com/benbjohnson/clock v1.3.5
	github.com/chromedp/cdproto v0.159.0
	github.com/chromedp/chromedp v0.23.0
	github.com/coder/websocket v1.8.15
	github.com/containerd/errdefs v1.0.0
	github.com/go-sql-driver/mysql v1.10.1
	github.com/jackc/pgx/v5 v5.12.0
	github.com/moby/moby/api v1.56.1
	github.com/moby/moby/client v0.6.2
	github.com/prometheus/client_golang v1.23.2
	github.com/redis/go-redis/v9 v9.22.0
	github.com/stretchr/testify v1.12.1
	github.com/ttlkit/ttlkit v0.0.0-00010101000000-000000000000
	github.com/ttlkit/ttlkit/internal/testenv v0.0.0-00010101000000-000000000000
	github.com/ttlkit/ttlkit/lease/redislease v0.0.0-00010101000000-000000000000
	github.com/ttlkit/ttlkit/lease/sqllease v0.0.0-00010101000000-000000000000
	github.com/ttlkit/ttlkit/metrics v0.0.0-00010101000000-000000000000
	github.com/ttlkit/ttlkit/pool/docker v0.0.0-00010101000000-000000000000
	github.com/ttlkit/ttlkit/pool/redispool v0.0.0-00010101000000-000000000000
	github.com/ttlkit/ttlkit/ttl/pgttl v0.0.0-00010101000000-000000000000
	github.com/ttlkit/ttlkit/ttl/redisttl v0.0.0-00010101000000-000000000000
	go.uber.org/goleak v1.3.0
	go.yaml.in/yaml/v3 v3.0.5
	golang.org/x/sys v0.47.0
	google.golang.org/grpc v1.78.0
)

require (
	filippo.io/edwards25519 v1.2.0 // indirect
	github.com/Microsoft/go-winio v0.6.2 // indirect
	github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream v1.7.26 // indirect
	github.com/aws/aws-sdk-go-v2/internal/configsources v1.5.11 // indirect
	github.com/aws/aws-sdk-go-v2/internal/endpoints/v2 v2.8.11 // indirect
	github.com/beorn7/perks v1.0.1 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/containerd/errdefs/pkg v0.3.0 // indirect
	github.com/distribution/reference v0.6.0 // indirect
	github.com/docker/go-connections v0.8.2 // indirect
	github.com/docker/go-units v0.5.0 // indirect
	github.com/felixge/httpsnoop v1.0.4 // indirect
	github.com/go-json-experiment/json v0.0.0-20260213210345-44df1a37e875 // indirect
	github.com/go-logr/logr v1.4.3 // indirect
	github.com/go-logr/stdr v1.2.2 // indirect
	github.com/jackc/pgpassfile v1.0.0 // indirect
	github.com/jackc/pgservicefile v0.0.0-20240606120523-5a60cdf6a761 // indirect
	github.com/jackc/puddle/v2 v2.2.3 // indirect
	github.com/kylelemons/godebug v1.1.0 // indirect
	github.com/moby/docker-image-spec v1.3.1 // indirect
	github.com/munnerz/goautoneg v0.0.0-20191010083416-a7dc8b61c822 // indirect
	github.com/opencontainers/go-digest v1.0.0 // indirect
	github.com/opencontainers/image-spec v1.1.1 // indirect
	github.com/prometheus/client_model v0.6.2 // indirect
	github.com/prometheus/common v0.66.1 // indirect
	github.com/prometheus/procfs v0.16.1 // indirect
	github.com/ttlkit/ttlkit/internal/redisrun v0.0.0-00010101000000-000000000000 // indirect
	go.opentelemetry.io/auto/sdk v1.2.1 // indirect
	go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp v0.60.0 // indirect
	go.opentelemetry.io/otel v1.38.0 // indirect
	go.opentelemetry.io/otel/metric v1.38.0 // indirect
	go.opentelemetry.io/otel/trace v1.38.0 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	go.yaml.in/yaml/v2 v2.4.2 // indirect
	golang.org/x/net v0.47.0 // indirect
	golang.org/x/sync v0.22.0 // indirect
	golang.org/x/text v0.41.0 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20251029180050-ab9386a59fda // indirect
	google.golang.org/protobuf v1.36.10 // indirect
)
