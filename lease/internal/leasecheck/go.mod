module github.com/ttlkit/ttlkit/lease/internal/leasecheck

go 1.25.0

replace github.com/ttlkit/ttlkit => ../../..

require (
	github.com/anishathalye/porcupine v1.3.1
	github.com/stretchr/testify v1.12.1
	github.com/ttlkit/ttlkit v0.0.0-00010101000000-000000000000
)

require (
	github.com/benbjohnson/clock v1.3.5 // indirect
	go.uber.org/goleak v1.3.0 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
)
