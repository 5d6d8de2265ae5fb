package agent_test

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/examples/sandboxes/agent"
)

// The owner is set once: the same owner again is fine, another is refused,
// and a caller without the token can neither read nor change it.
func TestOwner(t *testing.T) {
	c, _ := start(t, agent.Options{Token: "secret"})
	ctx := context.Background()

	owner, err := c.Owner(ctx)
	require.NoError(t, err)
	assert.Empty(t, owner, "a new sandbox has no owner")
	require.NoError(t, c.SetOwner(ctx, "conv-1"))
	require.NoError(t, c.SetOwner(ctx, "conv-1"), "setting the same owner again")
	var ae *agent.Error
	err = c.SetOwner(ctx, "conv-2")
	require.True(t, errors.As(err, &ae), "%v", err)
	assert.Equal(t, http.StatusConflict, ae.Status)
	err = c.SetOwner(ctx, "")
	require.True(t, errors.As(err, &ae), "%v", err)
	assert.Equal(t, http.StatusBadRequest, ae.Status)

	anon := agent.NewClient(c.BaseURL()[len("http://"):], nil, "")
	_, err = anon.Owner(ctx)
	require.True(t, errors.As(err, &ae), "%v", err)
	assert.Equal(t, http.StatusUnauthorized, ae.Status)
	require.Error(t, anon.SetOwner(ctx, "conv-3"))

	owner, err = c.Owner(ctx)
	require.NoError(t, err)
	assert.Equal(t, "conv-1", owner)
}
