module github.com/ttlkit/ttlkit/bench

go 1.25.0

replace github.com/ttlkit/ttlkit => ../

require (
	github.com/benbjohnson/clock v1.3.5 // indirect
	github.com/jackc/puddle/v2 v2.2.3 // indirect
	github.com/jellydator/ttlcache/v3 v3.4.1 // indirect
	github.com/jolestar/go-commons-pool/v2 v2.1.2 // indirect
	github.com/maypok86/otter/v2 v2.4.0 // indirect
	github.com/patrickmn/go-cache v2.1.0+incompatible // indirect
	github.com/ttlkit/ttlkit v0.0.0-00010101000000-000000000000 // indirect
	golang.org/x/sync v0.22.0 // indirect
)
