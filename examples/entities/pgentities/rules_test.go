package pgentities_test

import (
	"time"

	"github.com/ttlkit/ttlkit/ttl"
)

// workspaceRules are a cloud-IDE workspace system's rules: RUNNING
// entities idle for longer than standby get desired state STANDBY, and
// STANDBY entities that entered STANDBY longer than archive ago get
// ARCHIVED.
func workspaceRules(standby, archive time.Duration) []ttl.Rule {
	return []ttl.Rule{
		{Name: "standby", Phase: "RUNNING", Since: ttl.SinceLastActivity, After: standby, Then: "STANDBY"},
		{Name: "archive", Phase: "STANDBY", Since: ttl.SincePhaseChanged, After: archive, Then: "ARCHIVED"},
	}
}
