package sqllease_test

import (
	"io"
	"log"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/ttlkit/ttlkit/internal/leakcheck"
)

func TestMain(m *testing.M) {
	// The fault tests kill connections on purpose; the driver would log
	// every one of them.
	_ = mysql.SetLogger(log.New(io.Discard, "", 0))
	leakcheck.VerifyTestMain(m)
}
