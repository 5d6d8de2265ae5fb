package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
)

// BenchmarkPipeline is redis-benchmark -P 16 in-process: each parallel
// client sends batches of 16 SETs or GETs of 3-byte values over TCP and
// reads the 16 replies. Run it with -cpuprofile to see the server's costs.
func BenchmarkPipeline(b *testing.B) {
	for _, op := range []string{"SET", "GET"} {
		b.Run(op, func(b *testing.B) {
			_, addr := startServer(b, Config{})
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				c, err := net.Dial("tcp", addr)
				if err != nil {
					b.Error(err)
					return
				}
				defer c.Close()
				var batch strings.Builder
				for i := range 16 {
					k := fmt.Sprintf("key:%012d", i)
					if op == "SET" {
						fmt.Fprintf(&batch, "*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$3\r\nxxx\r\n", len(k), k)
					} else {
						fmt.Fprintf(&batch, "*2\r\n$3\r\nGET\r\n$%d\r\n%s\r\n", len(k), k)
					}
				}
				req := []byte(batch.String())
				r := bufio.NewReader(c)
				for pb.Next() {
					if _, err := c.Write(req); err != nil {
						b.Error(err)
						return
					}
					for range 16 {
						line, err := r.ReadSlice('\n')
						if err != nil {
							b.Error(err)
							return
						}
						if line[0] == '$' && line[1] != '-' {
							if _, err := r.Discard(5); err != nil && err != io.EOF {
								b.Error(err)
								return
							}
						}
					}
				}
			})
		})
	}
}
