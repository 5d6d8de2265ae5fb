package ttl_test

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

// containerRules are an AI sandbox system's rules for RUNNING containers:
// desired state DESTROYED after inactive without activity, or lifetime
// after creation, whichever comes first.
func containerRules(inactive, lifetime time.Duration) []ttl.Rule {
	return []ttl.Rule{
		{Name: "inactive", Phase: "RUNNING", Since: ttl.SinceLastActivity, After: inactive, Then: "DESTROYED"},
		{Name: "lifetime", Phase: "RUNNING", Since: ttl.SinceCreated, After: lifetime, Then: "DESTROYED"},
	}
}
