module github.com/ttlkit/ttlkit/bench

go 1.25

replace github.com/ttlkit/ttlkit => ../
